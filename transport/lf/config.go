package lf

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/electord/electord/internal/lfvariant"
	"github.com/electord/electord/transport/lf/engine"
)

// ErrUnsupported is returned by New where the pool cannot run (every
// platform but Linux), so callers can fall back to another transport.
var ErrUnsupported = errors.New("lf: the Leader/Followers pool needs Linux epoll")

// ErrServerStopped is returned by Serve when it is called after Stop or
// GracefulStop, or a second time.
var ErrServerStopped = errors.New("lf: the server was stopped")

// Defaults for Config.
const (
	DefaultReadBudget = 256 << 10
	MinWorkers        = 2
)

// Config tunes a Server. The zero value is usable. The comparison variants
// of the pool (FIFO promotion, LockOSThread, a blocking wait, more events
// per wait) are not settings: they are reached through
// internal/lfvariant, for peerbench and the tests.
type Config struct {
	// Workers is the pool size; 0 means runtime.GOMAXPROCS(0)*2. Values
	// below MinWorkers are raised to MinWorkers.
	Workers int
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
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0) * 2
	}
	if c.Workers < MinWorkers {
		c.Workers = MinWorkers
	}
	if c.ReadBudget == 0 {
		c.ReadBudget = DefaultReadBudget
	}
	return c, nil
}

// New returns a Server that serves the services registered on reg. Register
// every service before calling Serve. Off Linux it returns ErrUnsupported.
func New(reg *engine.Registry, cfg Config) (*Server, error) {
	return newServer(reg, cfg, lfvariant.Variant{})
}

// The comparison variants reach newServer through lfvariant.New.
func init() {
	lfvariant.New = func(reg *engine.Registry, workers int, lim engine.Limits, v lfvariant.Variant) (lfvariant.Server, error) {
		s, err := newServer(reg, Config{Workers: workers, Limits: lim}, v)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// variantDefaults checks v and fills in its defaults.
func variantDefaults(v lfvariant.Variant) (lfvariant.Variant, error) {
	if v.EventsPerWait < 0 || v.EventsPerWait > lfvariant.MaxEventsPerWait {
		return v, fmt.Errorf("lf: EventsPerWait %d is outside 0..%d", v.EventsPerWait, lfvariant.MaxEventsPerWait)
	}
	if v.EventsPerWait == 0 {
		v.EventsPerWait = 1
	}
	return v, nil
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
}
