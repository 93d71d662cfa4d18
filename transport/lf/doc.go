// Package lf serves gRPC with a Leader/Followers pool: a fixed set of
// goroutines that take turns waiting on one epoll set and then do all the
// work for the event they got, with no queue and no hand-off between
// goroutines. The protocol itself (HTTP/2 framing, gRPC calls) lives in
// transport/lf/engine, which does no I/O; this package owns the sockets.
//
// # Roles
//
// Each pool goroutine is, at any moment, in one of three roles:
//
//   - the poller, at most one, blocked in epoll_wait for a single event;
//   - a handling goroutine, serving the one event it got while polling;
//   - a standby goroutine, parked on its own wake channel until it is made
//     the poller.
//
// These are the paper's leader, processing thread and followers (Schmidt
// et al., "Leader/Followers"). The pool has its own words for them because
// leader and follower are the election's roles in this repository; the
// pattern keeps its name.
//
// A goroutine that finishes handling tries to poll again. If a poller is
// present it pushes its wake channel onto the standby list (a stack: LIFO
// promotion; the FIFO comparison variant uses a queue) and blocks;
// otherwise it polls at once.
//
// # Promotion
//
// The poller asks epoll for exactly one event. Before touching it, the
// poller clears the "poller present" flag and signals one standby
// goroutine's wake channel (a promotion), so the pool never stops watching
// the sockets while it works. (With no goroutine on standby the pool is
// saturated; the event count of NoStandby says how often.) The old poller
// then handles the event inline: it accepts connections if the listener is
// ready, or it reads a connection's bytes (up to ReadBudget), feeds them to
// the connection's engine.Session, runs every complete call's handler right
// there, and writes the answers. Then it rejoins the pool.
//
// # One-shot arming
//
// Every descriptor sits in epoll level-triggered with EPOLLONESHOT: once
// epoll reports it, it is disabled until re-armed with EPOLL_CTL_MOD. So a
// connection is reported to one poller, is handled by one goroutine, and
// is re-armed by that goroutine when it is done (with EPOLLOUT added while
// output is waiting). Because arming is level-triggered, data that arrived
// during handling is reported right after the re-arm: no wake-up is lost.
//
// # Ownership
//
// Each descriptor has an atomic state, armed or held. Whoever wants to use
// it (the goroutine that got its event, or a shutdown sweep) must move it
// from armed to held; only the holder reads, writes, closes it or touches
// its Session. A failed move means the event was stale or the descriptor
// is already being handled, and the event is dropped. Releasing is "store
// armed, then re-arm in epoll". The epoll data of each descriptor carries
// a generation number next to the fd, so an event about a closed
// descriptor is never applied to a new one that reused its number.
//
// # Deadlines and limits
//
// A connection that has not completed the HTTP/2 handshake within
// Config.HandshakeTimeout, or has had no open stream and sent no frame for
// Config.IdleTimeout, is closed (the idle one after a GOAWAY). The
// deadlines are a timerfd in the same epoll set, armed one-shot for the
// earliest one: its event reaches the poller like any other, which
// promotes a standby goroutine and then sweeps the connections, taking
// each armed one (armed→held) and settling it as any holder does; a busy
// connection is looked at again later. Connections beyond Config.MaxConns are closed as
// soon as they are accepted. What each connection, and all of them
// together, may make the engine buffer is bounded by engine.Limits and
// Config.MaxBufferedBytes.
//
// # Shutdown
//
// GracefulStop closes the listener and, taking each idle connection in
// turn, queues a GOAWAY on it; a connection that was busy gets its GOAWAY
// from its holder when it releases it. Connections close as they drain.
// When none is left, an eventfd in the same epoll set wakes the poller,
// which wakes every standby goroutine (the pool's only broadcast) and all pool
// goroutines exit. Stop does the same at once: it cancels the calls'
// base context and closes every descriptor it can take; busy ones are
// closed by their holders.
//
// The pool runs on Linux only; elsewhere New returns ErrUnsupported.
package lf
