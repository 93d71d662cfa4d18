// Package lfvariant reaches the comparison variants of transport/lf's
// Leader/Followers pool: settings that exist to be measured against the
// default pool (docs/LF.md, "Variants"), not for operators, so lf.Config
// does not hold them. transport/lf fills in New; peerbench (through
// lftest's lf-* kinds) and the tests call it. The product never does.
package lfvariant

import (
	"net"

	"github.com/electord/electord/transport/lf/engine"
)

// MaxEventsPerWait is the largest Variant.EventsPerWait.
const MaxEventsPerWait = 64

// Variant is one comparison setting of the pool. The zero Variant is the
// pool lf.New builds.
type Variant struct {
	// FIFO promotes the follower that has waited longest. The default,
	// LIFO, promotes the one that started waiting last: its stack and
	// caches are the warmest.
	FIFO bool
	// LockOSThread wires each pool goroutine to its own OS thread.
	LockOSThread bool
	// BlockingWait makes the leader wait in a blocking epoll_wait. By
	// default the leader parks on the epoll set's own readiness in the Go
	// runtime's poller and then takes one event with a non-blocking
	// epoll_wait: a leader blocked in a system call keeps the scheduler's
	// P until sysmon takes it back, and on a small GOMAXPROCS the event it
	// returns with can then wait up to a 10 ms time slice for a P (the
	// p99.9 in docs/BENCHMARKS.md). Either way one leader at a time waits
	// on the set.
	BlockingWait bool
	// EventsPerWait is how many ready handles the leader may take from one
	// epoll_wait (0 means 1, the paper's one event per leadership; at most
	// MaxEventsPerWait). Each is disarmed (one-shot) and the leader, having
	// promoted a follower, processes them all itself, one after another, as
	// the selector-based production pool of the practice page does: fewer
	// waits and promotions per event, less parallelism between the events
	// of one batch. More per wait is cheaper under load, but a handler that
	// blocks then also holds the rest of its batch, which other followers
	// could have served: N blocked handlers no longer mean N-way service.
	EventsPerWait int
}

// Server is the pool New builds (an *lf.Server).
type Server interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// New builds the pool with workers goroutines (0: lf.Config's default),
// limits lim and the variant v. transport/lf sets it when it is linked in;
// off Linux it returns lf.ErrUnsupported.
var New func(reg *engine.Registry, workers int, lim engine.Limits, v Variant) (Server, error)
