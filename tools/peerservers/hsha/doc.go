// Package hsha drives the lf engine as a Half-Sync/Half-Async server, as a
// second control for the Leader/Followers pool in transport/lf.
//
// The three layers are kept apart on purpose:
//
//   - Async: one reactor goroutine owns a level-triggered epoll set holding
//     the listening socket, every connection (non-blocking file descriptors
//     it accepted itself, outside Go's netpoller) and an eventfd. On
//     readiness it accepts, or reads what is there and feeds it to the
//     connection's engine.Session. It never runs a handler and never blocks
//     on anything but epoll_wait.
//   - Queueing: each call the Session assembles is offered, without
//     blocking, to a bounded queue. When the queue is full the reject policy
//     answers the call at once with RESOURCE_EXHAUSTED; overload becomes a
//     fast, counted "no" instead of unbounded memory or a stalled reactor.
//   - Sync: a fixed pool of workers takes calls off the queue and runs the
//     handlers as plain blocking code, then, holding the connection's lock,
//     has the Session write the response and pushes the bytes out with a
//     non-blocking write. What does not fit in the socket is left in the
//     Session's output and the reactor is asked, through a small list and
//     the eventfd, to watch for writability and finish the job.
//
// The protocol code is the same engine the Leader/Followers pool and the
// goroutine-per-connection control (tools/peerservers/perconn) use, so a
// benchmark comparing them measures the concurrency models: here every call
// pays a hand-off through the queue (and a wake-up of a worker), which
// Leader/Followers avoids, in exchange for independent sizing of the I/O and
// processing halves and an explicit overload policy.
//
// The server is Linux-only (epoll, eventfd) and mimics the lifecycle of
// *grpc.Server: Serve, GracefulStop, Stop.
package hsha
