//go:build linux

package hsha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

// Defaults for Config.
const (
	DefaultQueueCap = 1024
	// The default worker count is 2×GOMAXPROCS at New.
)

const (
	readBufBytes = 64 << 10 // the reactor's one read buffer
	maxEvents    = 128      // events per epoll_wait
	acceptBurst  = 64       // accepts per listener readiness event
)

// RejectMessage is the status message of a call the reject policy answers.
const RejectMessage = "hsha: queue full"

// ErrServerStopped is returned by Serve when it is called after Stop or
// GracefulStop.
var ErrServerStopped = errors.New("hsha: server stopped")

// Config sizes the two halves. Zero fields take the defaults.
type Config struct {
	Workers  int // sync layer: handler goroutines; default 2×GOMAXPROCS
	QueueCap int // queueing layer: bounded queue capacity; default 1024
	Limits   engine.Limits
}

// Stats are the Server's counters.
type Stats struct {
	QueueDepth int    // calls waiting in the queue now
	MaxDepth   int    // deepest the queue has been right after an offer
	Enqueued   uint64 // calls the queue accepted
	Rejected   uint64 // calls the reject policy answered (queue full)
	Events     uint64 // epoll events the reactor handled
	Wakeups    uint64 // eventfd wake-ups the reactor handled
	WriteWaits uint64 // times a full socket made the reactor wait for EPOLLOUT
	Accepted   uint64 // connections accepted
	Open       int64  // connections open now
	Finished   uint64 // calls run and answered by workers
	Dropped    uint64 // queued calls skipped because their connection closed
	Panics     uint64 // engine panics recovered (the connection is closed)
}

// Server states.
const (
	stRunning int32 = iota
	stDraining
	stStopped
)

// Server serves gRPC calls from a Registry as Half-Sync/Half-Async.
type Server struct {
	reg     *engine.Registry
	lim     engine.Limits
	workers int
	queue   chan task

	ctx    context.Context // base of every call's context; canceled by Stop
	cancel context.CancelFunc

	mu       sync.Mutex // guards serving; orders state changes against Serve
	serving  bool
	state    atomic.Int32
	done     chan struct{} // closed once everything has stopped
	doneOnce sync.Once

	// wmu guards the eventfd (efd is -1 once closed), the want list of
	// connections workers need the reactor to look at, and wakePending.
	wmu         sync.Mutex
	efd         int
	want        []*conn
	wakePending bool

	// Reactor-only state.
	epfd      int
	lfd       int // dup of the listener's fd; -1 once closed
	lis       net.Listener
	conns     map[int]*conn
	buf       []byte
	calls     []*engine.Call
	spare     []*conn
	rEfd      int
	rDraining bool

	sndBuf int // SO_SNDBUF of accepted sockets when > 0 (tests: forces EAGAIN)

	maxDepth atomic.Int64
	enqueued, rejected, events, wakeups, writeWaits, accepted,
	finished, dropped, panics atomic.Uint64
	open atomic.Int64
}

type task struct {
	c    *conn
	call *engine.Call
}

// conn is one connection. The reactor owns its fd's epoll interest and its
// closing; the Session is shared with the workers under mu.
type conn struct {
	fd     int
	ctx    context.Context // base of its calls; canceled when it closes
	cancel context.CancelFunc

	mu     sync.Mutex
	sess   *engine.Session
	closed bool // fd closed; nobody may touch fd or sess any more
	broken bool // a write failed; the reactor must close

	dead atomic.Bool // mirrors closed, for a lock-free check by workers

	queuedWant bool // on the want list; guarded by Server.wmu

	// Reactor-only.
	rclosed bool
	wantOut bool // EPOLLOUT interest is set
	closing bool // Feed failed: close once the output is flushed
}

// New returns a Server that runs the handlers of reg. Register every service
// on reg before calling Serve.
func New(reg *engine.Registry, cfg Config) *Server {
	if cfg.Workers <= 0 {
		cfg.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.QueueCap <= 0 {
		cfg.QueueCap = DefaultQueueCap
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		reg:     reg,
		lim:     cfg.Limits,
		workers: cfg.Workers,
		queue:   make(chan task, cfg.QueueCap),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		efd:     -1,
		epfd:    -1,
		lfd:     -1,
		rEfd:    -1,
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	return Stats{
		QueueDepth: len(s.queue),
		MaxDepth:   int(s.maxDepth.Load()),
		Enqueued:   s.enqueued.Load(),
		Rejected:   s.rejected.Load(),
		Events:     s.events.Load(),
		Wakeups:    s.wakeups.Load(),
		WriteWaits: s.writeWaits.Load(),
		Accepted:   s.accepted.Load(),
		Open:       s.open.Load(),
		Finished:   s.finished.Load(),
		Dropped:    s.dropped.Load(),
		Panics:     s.panics.Load(),
	}
}

// Serve runs the reactor on the calling goroutine, with the workers, until
// Stop or GracefulStop; it then returns nil once every goroutine of the
// Server has exited. lis must expose its file descriptor (syscall.Conn, as
// *net.TCPListener and *net.UnixListener do); it is closed when Serve
// returns. A Server serves one listener: a second Serve fails. Serve after a
// stop returns ErrServerStopped.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.state.Load() != stRunning {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	if s.serving {
		s.mu.Unlock()
		lis.Close()
		return errors.New("hsha: Serve called twice")
	}
	if err := s.setup(lis); err != nil {
		s.mu.Unlock()
		s.closeFDs()
		lis.Close()
		return err
	}
	s.serving = true
	s.mu.Unlock()

	var wg sync.WaitGroup
	for range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.work()
		}()
	}
	err := s.reactor()
	// The reactor is the queue's only sender; closing it lets the workers
	// drain what is left (calls of closed connections, skipped) and exit.
	close(s.queue)
	wg.Wait()
	s.closeFDs()
	s.finish()
	return err
}

// setup creates the epoll set and eventfd and registers the listener.
// Called with s.mu held.
func (s *Server) setup(lis net.Listener) error {
	sc, ok := lis.(syscall.Conn)
	if !ok {
		return fmt.Errorf("hsha: listener %T does not expose its file descriptor", lis)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var derr error
	if err := rc.Control(func(fd uintptr) {
		s.lfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return err
	}
	if derr != nil {
		s.lfd = -1
		return fmt.Errorf("hsha: dup listener: %w", derr)
	}
	// The dup shares the listener's open file description, which Go has made
	// non-blocking already; make sure.
	if err := unix.SetNonblock(s.lfd, true); err != nil {
		return err
	}
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		s.epfd = -1
		return fmt.Errorf("hsha: epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("hsha: eventfd: %w", err)
	}
	s.wmu.Lock()
	s.efd = efd
	s.wmu.Unlock()
	s.rEfd = efd
	if err := s.ctl(unix.EPOLL_CTL_ADD, s.lfd, unix.EPOLLIN); err != nil {
		return err
	}
	if err := s.ctl(unix.EPOLL_CTL_ADD, efd, unix.EPOLLIN); err != nil {
		return err
	}
	s.lis = lis
	s.conns = map[int]*conn{}
	s.buf = make([]byte, readBufBytes)
	return nil
}

func (s *Server) ctl(op, fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := rawsys.EpollCtl(s.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("hsha: epoll_ctl(%d, fd %d): %w", op, fd, err)
	}
	return nil
}

func (s *Server) closeFDs() {
	if s.lfd >= 0 {
		unix.Close(s.lfd)
		s.lfd = -1
	}
	s.wmu.Lock()
	if s.efd >= 0 {
		unix.Close(s.efd)
		s.efd = -1
	}
	s.wmu.Unlock()
	s.rEfd = -1
	if s.epfd >= 0 {
		unix.Close(s.epfd)
		s.epfd = -1
	}
}

func (s *Server) finish() {
	s.doneOnce.Do(func() {
		s.cancel()
		close(s.done)
	})
}

// GracefulStop stops accepting, sends GOAWAY on every connection, lets the
// calls already accepted run and be answered, closes each connection once
// drained, and returns when every goroutine of the Server has exited.
func (s *Server) GracefulStop() { s.stop(stDraining) }

// Stop closes the listener and every connection at once and cancels the
// contexts of running calls. It returns when every goroutine of the Server
// has exited, so handlers must honour context cancellation.
func (s *Server) Stop() { s.stop(stStopped) }

func (s *Server) stop(to int32) {
	s.mu.Lock()
	if s.state.Load() < to {
		s.state.Store(to)
	}
	serving := s.serving
	s.mu.Unlock()
	// On Stop the reactor closes every connection first and only then
	// cancels the calls (closeAll), so a running call's client sees the
	// connection go (Unavailable, as with grpc-go) rather than a Canceled
	// answer it never asked for.
	if !serving {
		s.finish()
		return
	}
	s.wake()
	<-s.done
}

// wake makes the reactor's epoll_wait return (if the eventfd is still
// open) to look at the state and the want list.
func (s *Server) wake() {
	s.wmu.Lock()
	s.wakeLocked()
	s.wmu.Unlock()
}

func (s *Server) wakeLocked() {
	if s.wakePending || s.efd < 0 {
		return
	}
	s.wakePending = true
	// Any non-zero count wakes the reader, whatever the byte order.
	one := [8]byte{1}
	unix.Write(s.efd, one[:])
}

// notify asks the reactor to look at c: its output did not all fit, a write
// failed, or its Session is done.
func (s *Server) notify(c *conn) {
	s.wmu.Lock()
	if !c.queuedWant {
		c.queuedWant = true
		s.want = append(s.want, c)
	}
	s.wakeLocked()
	s.wmu.Unlock()
}

// reactor is the async layer: it waits on epoll and handles readiness until
// the server is stopped, or drained and without connections.
func (s *Server) reactor() error {
	events := make([]unix.EpollEvent, maxEvents)
	for {
		if s.checkState() {
			return nil
		}
		n, err := unix.EpollWait(s.epfd, events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			s.closeAll()
			return fmt.Errorf("hsha: epoll_wait: %w", err)
		}
		s.events.Add(uint64(n))
		for i := range n {
			ev := &events[i]
			fd := int(ev.Fd)
			switch {
			case fd == s.rEfd:
				s.onWake()
			case fd == s.lfd:
				s.accept()
			default:
				if c := s.conns[fd]; c != nil {
					s.onConn(c, ev.Events)
				}
			}
		}
	}
}

// checkState acts on a state change and reports whether the reactor is to
// exit.
func (s *Server) checkState() bool {
	switch s.state.Load() {
	case stStopped:
		s.closeAll()
		return true
	case stDraining:
		if !s.rDraining {
			s.rDraining = true
			s.closeListener()
			for _, c := range s.conns {
				s.goAway(c)
			}
		}
		return len(s.conns) == 0
	}
	return false
}

func (s *Server) closeListener() {
	if s.lfd >= 0 {
		unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, s.lfd, nil)
		unix.Close(s.lfd)
		s.lfd = -1
	}
	s.lis.Close()
}

func (s *Server) closeAll() {
	s.closeListener()
	for _, c := range s.conns {
		s.closeConn(c)
	}
	s.cancel()
}

func (s *Server) onWake() {
	s.wakeups.Add(1)
	s.wmu.Lock()
	var b [8]byte
	unix.Read(s.efd, b[:])
	s.wakePending = false
	list := s.want
	s.want = s.spare[:0]
	for _, c := range list {
		c.queuedWant = false
	}
	s.wmu.Unlock()
	for _, c := range list {
		if !c.rclosed {
			s.writable(c)
		}
	}
	clear(list)
	s.spare = list[:0]
}

func (s *Server) accept() {
	for range acceptBurst {
		nfd, sa, err := unix.Accept4(s.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			// EAGAIN: nothing left. Anything else (EMFILE, ...): try again at
			// the next readiness event.
			return
		}
		s.accepted.Add(1)
		unix.SetsockoptInt(nfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // fails harmlessly on unix sockets
		if s.sndBuf > 0 {
			unix.SetsockoptInt(nfd, unix.SOL_SOCKET, unix.SO_SNDBUF, s.sndBuf)
		}
		ctx, cancel := context.WithCancel(s.ctx)
		c := &conn{fd: nfd, ctx: ctx, cancel: cancel}
		if err := s.ctl(unix.EPOLL_CTL_ADD, nfd, unix.EPOLLIN); err != nil {
			unix.Close(nfd)
			cancel()
			continue
		}
		s.conns[nfd] = c
		s.open.Add(1)
		s.guard(c, func() {
			var pending, broken bool
			c.with(func() {
				c.sess = engine.NewSession(s.reg, s.lim, rawsys.Addr(sa))
				// Calls run on the workers while the reactor keeps
				// reading, so a client's RST_STREAM can cancel a running
				// call, as it does with grpc-go.
				c.sess.CancelOnReset()
				pending, broken = c.flushLocked()
			})
			s.afterWrite(c, pending, broken, false)
		})
	}
}

// guard runs f in the reactor, turning a panic (an engine bug) into closing
// c. Every locked section inside f releases c.mu on the way out (conn.with).
func (s *Server) guard(c *conn, f func()) {
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			s.closeConn(c)
		}
	}()
	f()
}

// with runs f holding c.mu, releasing it even if f panics.
func (c *conn) with(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

func (s *Server) onConn(c *conn, ev uint32) {
	s.guard(c, func() {
		if ev&unix.EPOLLOUT != 0 {
			s.writable(c)
		}
		if c.rclosed {
			return
		}
		if c.closing {
			if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				s.closeConn(c) // it will never take the rest of the output
			}
			return
		}
		if ev&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			s.readable(c)
		}
	})
}

// readable does one non-blocking read, feeds it to the Session and offers
// the calls it completes to the queue.
func (s *Server) readable(c *conn) {
	n, err := rawsys.Read(c.fd, s.buf)
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if err != nil || n <= 0 {
		s.closeConn(c) // EOF or a broken connection
		return
	}
	var ferr error
	var pending, broken, done bool
	c.with(func() {
		ferr = c.sess.Feed(s.buf[:n])
		if ferr == nil {
			s.calls = c.sess.TakeCalls(s.calls[:0])
			for _, call := range s.calls {
				s.offer(c, call)
			}
			clear(s.calls)
		}
		pending, broken = c.flushLocked()
		done = c.sess.Done()
		if !pending && c.sess.Open() == 0 {
			c.sess.Release()
		}
	})
	if ferr != nil {
		c.closing = true
	}
	s.afterWrite(c, pending, broken, done)
}

// offer is the boundary between the halves: a non-blocking enqueue, with
// the reject policy on its false branch. Called by the reactor with c.mu
// held.
func (s *Server) offer(c *conn, call *engine.Call) {
	select {
	case s.queue <- task{c: c, call: call}:
		s.enqueued.Add(1)
		if d := int64(len(s.queue)); d > s.maxDepth.Load() {
			s.maxDepth.Store(d) // the reactor is the only writer
		}
	default:
		s.rejected.Add(1)
		c.sess.Reject(call, codes.ResourceExhausted, RejectMessage)
	}
}

// writable pushes out what is left of c's output.
func (s *Server) writable(c *conn) {
	var pending, broken, done bool
	c.with(func() {
		pending, broken = c.flushLocked()
		done = c.sess.Done()
	})
	s.afterWrite(c, pending, broken, done)
}

// afterWrite sets c's epoll interest for what is left to write, or closes c.
func (s *Server) afterWrite(c *conn, pending, broken, done bool) {
	if broken {
		s.closeConn(c)
		return
	}
	if pending {
		if !c.wantOut || c.closing {
			ev := uint32(unix.EPOLLIN | unix.EPOLLOUT)
			if c.closing {
				ev = unix.EPOLLOUT
			}
			if s.ctl(unix.EPOLL_CTL_MOD, c.fd, ev) != nil {
				s.closeConn(c)
				return
			}
			if !c.wantOut {
				s.writeWaits.Add(1)
			}
			c.wantOut = true
		}
		return
	}
	if done || c.closing {
		s.closeConn(c)
		return
	}
	if c.wantOut {
		if s.ctl(unix.EPOLL_CTL_MOD, c.fd, unix.EPOLLIN) != nil {
			s.closeConn(c)
			return
		}
		c.wantOut = false
	}
}

// goAway starts c's graceful close.
func (s *Server) goAway(c *conn) {
	s.guard(c, func() {
		var pending, broken, done bool
		c.with(func() {
			c.sess.GoAway()
			pending, broken = c.flushLocked()
			done = c.sess.Done()
		})
		s.afterWrite(c, pending, broken, done)
	})
}

// closeConn closes c. Reactor only.
func (s *Server) closeConn(c *conn) {
	if c.rclosed {
		return
	}
	c.rclosed = true
	c.mu.Lock()
	c.closed = true
	c.dead.Store(true)
	unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	unix.Close(c.fd)
	c.mu.Unlock()
	c.cancel()
	delete(s.conns, c.fd)
	s.open.Add(-1)
}

// flushLocked writes as much of the Session's output as the socket takes
// without blocking. It reports whether bytes are left (the socket is full)
// and whether the connection is broken. Called with c.mu held.
func (c *conn) flushLocked() (pending, broken bool) {
	if c.closed || c.broken {
		return false, c.broken
	}
	if c.sess == nil {
		return false, false
	}
	pending, err := rawsys.Flush(c.fd, c.sess)
	if err != nil {
		c.broken = true
		return false, true
	}
	return pending, false
}

// work is the sync layer: one worker's loop.
func (s *Server) work() {
	for t := range s.queue {
		s.runTask(t)
	}
}

func (s *Server) runTask(t task) {
	c := t.c
	if c.dead.Load() {
		s.dropped.Add(1)
		return
	}
	t.call.Run(c.ctx) // no lock: Run touches only the call
	if s.answer(c, t.call) {
		s.notify(c)
	}
}

// answer has the Session write the call's response and pushes it out. It
// reports whether the reactor has to look at c.
func (s *Server) answer(c *conn, call *engine.Call) (notify bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			c.broken = true
			notify = true
		}
	}()
	if c.closed {
		s.dropped.Add(1)
		return false
	}
	c.sess.Finish(call)
	s.finished.Add(1)
	pending, broken := c.flushLocked()
	return pending || broken || c.sess.Done()
}
