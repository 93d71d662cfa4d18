//go:build lfvariant

package lf

import (
	"fmt"

	"github.com/electord/electord/transport/lf/engine"
)

// The comparison variants of the pool: settings that exist to be measured
// against the default pool (docs/LF.md, "Variants"), not for operators, so
// Config does not hold them. They are compiled in only with the lfvariant
// build tag (peerbench and the tests); variant_off.go makes them constants
// in every other build.

// MaxEventsPerWait is the largest Variant.EventsPerWait.
const MaxEventsPerWait = 64

// Variant is one comparison setting of the pool. The zero Variant is the
// pool New builds.
type Variant struct {
	// FIFO promotes the standby goroutine that has waited longest. The
	// default, LIFO, promotes the one that started waiting last: its stack
	// and caches are the warmest.
	FIFO bool
	// LockOSThread wires each pool goroutine to its own OS thread.
	LockOSThread bool
	// BlockingWait makes the poller wait in a blocking epoll_wait. By
	// default the poller parks on the epoll set's own readiness in the Go
	// runtime's poller and then takes one event with a non-blocking
	// epoll_wait: a goroutine blocked in a system call keeps the
	// scheduler's P until sysmon takes it back, and on a small GOMAXPROCS
	// the event it returns with can then wait up to a 10 ms time slice for
	// a P (the p99.9 in docs/BENCHMARKS.md). Either way one poller at a
	// time waits on the set.
	BlockingWait bool
	// EventsPerWait is how many ready handles the poller may take from one
	// epoll_wait (0 means 1, the paper's one event per wait; at most
	// MaxEventsPerWait). Each is disarmed (one-shot) and the poller, having
	// promoted a standby goroutine, handles them all itself, one after
	// another, as the selector-based production pool of the practice page
	// does: fewer waits and promotions per event, less parallelism between
	// the events of one batch. More per wait is cheaper under load, but a
	// handler that blocks then also holds the rest of its batch, which
	// standby goroutines could have served: N blocked handlers no longer
	// mean N-way service.
	EventsPerWait int
}

// NewVariant builds the pool of cfg (as New does) with the variant v. Off
// Linux it returns ErrUnsupported.
func NewVariant(reg *engine.Registry, cfg Config, v Variant) (*Server, error) {
	if v.EventsPerWait < 0 || v.EventsPerWait > MaxEventsPerWait {
		return nil, fmt.Errorf("lf: EventsPerWait %d is outside 0..%d", v.EventsPerWait, MaxEventsPerWait)
	}
	return newServer(reg, cfg, variant(v))
}

// variant is the Variant a Server runs with.
type variant Variant

func (v variant) fifo() bool         { return v.FIFO }
func (v variant) lockOSThread() bool { return v.LockOSThread }
func (v variant) blockingWait() bool { return v.BlockingWait }
func (v variant) eventsPerWait() int { return max(v.EventsPerWait, 1) }
