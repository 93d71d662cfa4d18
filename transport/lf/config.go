package lf

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/electord/electord/transport/lf/engine"
)

// ErrUnsupported is returned by New where the pool cannot run (every
// platform but Linux), so callers can fall back to another transport.
var ErrUnsupported = errors.New("lf: the Leader/Followers pool needs Linux epoll")

// ErrServerStopped is returned by Serve when it is called after Stop or
// GracefulStop, or a second time.
var ErrServerStopped = errors.New("lf: the server was stopped")

// Order is the promotion order of waiting followers.
type Order int

const (
	// LIFO promotes the follower that started waiting last: its stack and
	// caches are the warmest. The default.
	LIFO Order = iota
	// FIFO promotes the follower that has waited longest.
	FIFO
)

func (o Order) String() string {
	switch o {
	case LIFO:
		return "LIFO"
	case FIFO:
		return "FIFO"
	}
	return "Order(?)"
}

// Defaults for Config.
const (
	DefaultReadBudget = 256 << 10
	MinWorkers        = 2
	MaxEventsPerWait  = 64
	// DefaultEventsPerWait is the paper's one event per leadership. More
	// per wait is cheaper under load (docs/BENCHMARKS.md) but a handler that
	// blocks then also holds the rest of its batch, which other followers
	// could have served: N blocked handlers no longer mean N-way service.
	DefaultEventsPerWait = 1
)

// Config tunes a Server. The zero value is usable.
type Config struct {
	// Workers is the pool size; 0 means runtime.GOMAXPROCS(0)*2. Values
	// below MinWorkers are raised to MinWorkers.
	Workers int
	// Order is the promotion order of followers (LIFO by default).
	Order Order
	// LockOSThread wires each pool goroutine to its own OS thread.
	LockOSThread bool
	// BlockingWait makes the leader wait in a blocking epoll_wait. By
	// default the leader parks on the epoll set's own readiness in the Go
	// runtime's poller and then takes one event with a non-blocking
	// epoll_wait: a leader blocked in a system call keeps the scheduler's
	// P until sysmon takes it back, and on a small GOMAXPROCS the event it
	// returns with can then wait up to a 10 ms time slice for a P (the
	// p99.9 in docs/BENCHMARKS.md). Either way one leader at a time waits
	// on the set and takes one event.
	BlockingWait bool
	// EventsPerWait is how many ready handles the leader may take from one
	// epoll_wait (0 means DefaultEventsPerWait; 1 is the paper's one event
	// per leadership). Each is disarmed (one-shot) and the leader, having
	// promoted a follower, processes them all itself, one after another, as
	// the selector-based production pool of the practice page does: fewer
	// waits and promotions per event, less parallelism between the events
	// of one batch. Measured in docs/BENCHMARKS.md.
	EventsPerWait int
	// Limits bound what one connection may ask (see engine.Limits).
	Limits engine.Limits
	// ReadBudget is the most bytes read from one connection per event
	// before it is re-armed and other connections get their turn; 0 means
	// DefaultReadBudget.
	ReadBudget int
}

func (c Config) withDefaults() (Config, error) {
	if c.Workers < 0 {
		return c, errors.New("lf: negative Workers")
	}
	if c.ReadBudget < 0 {
		return c, errors.New("lf: negative ReadBudget")
	}
	if c.Order != LIFO && c.Order != FIFO {
		return c, errors.New("lf: unknown Order")
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0) * 2
	}
	if c.Workers < MinWorkers {
		c.Workers = MinWorkers
	}
	if c.ReadBudget == 0 {
		c.ReadBudget = DefaultReadBudget
	}
	if c.EventsPerWait < 0 || c.EventsPerWait > MaxEventsPerWait {
		return c, fmt.Errorf("lf: EventsPerWait %d is outside 0..%d", c.EventsPerWait, MaxEventsPerWait)
	}
	if c.EventsPerWait == 0 {
		c.EventsPerWait = DefaultEventsPerWait
	}
	return c, nil
}

// Stats is a snapshot of the pool's gauges and counters.
type Stats struct {
	// Gauges: pool goroutines leading (0 or 1), processing an event, and
	// waiting as followers; Live is how many pool goroutines exist.
	Leaders, Processing, Followers, Live int
	// Conns is the number of open connections.
	Conns int

	// Events counts events returned by epoll (one per leadership);
	// Stale counts those that were ignored because the handle was gone,
	// reused or already owned.
	Events, Stale uint64
	// Promotions counts followers woken to lead; NoFollower counts
	// leaderships given up while no follower was waiting (the pool was
	// saturated).
	Promotions, NoFollower uint64
	// Accepts counts accepted connections.
	Accepts uint64
	// AcceptPauses counts the times accept failed for lack of descriptors
	// or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) and the listener was left
	// unarmed for a back-off (5 ms, doubling to 1 s) instead of spinning.
	AcceptPauses uint64
	// Calls counts calls run; HandlerErrors those whose handler returned
	// an error; HandlerPanics those whose handler panicked (the engine
	// turns them into Internal errors).
	Calls, HandlerErrors, HandlerPanics uint64
	// ConnErrors counts connections closed because of a read, write or
	// protocol error (Feed failing).
	ConnErrors uint64
	// Panics counts panics the pool recovered while processing a
	// connection; each closed that connection.
	Panics uint64

	// EpollWaiters is the most pool goroutines ever seen inside
	// epoll_wait at once. The pattern keeps it at 1.
	EpollWaiters int
}
