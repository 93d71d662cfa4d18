//go:build linux

package lf

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electord/electord/transport/lf/engine"
)

// Server is a Leader/Followers pool serving gRPC (through engine) on one
// listener. See the package comment.
type Server struct {
	reg     *engine.Registry
	cfg     Config
	variant variant         // constant but in comparison runs (variant_off.go)
	ctx     context.Context // base context of every call; Stop cancels it
	cancel  context.CancelFunc

	// Lifecycle.
	lifeMu   sync.Mutex
	started  bool
	tornDown bool           // teardown began; sweeps may no longer start
	sweeps   sync.WaitGroup // shutdown sweeps in progress
	done     chan struct{}  // closed when Serve finished tearing down
	fatalErr error
	stopping atomic.Bool // GracefulStop or Stop called
	stopped  atomic.Bool // Stop called: close everything now
	woken    atomic.Bool // the eventfd was signalled

	// Set up by Serve before the pool starts; read-only afterwards.
	epfd     int
	epFile   *os.File        // epfd, registered in the runtime poller (unless variant.blockingWait())
	epRaw    syscall.RawConn // epFile's
	wakeFD   int             // the eventfd that ends the pool (wake)
	listener *handle
	unixPath string // socket file of a Unix listener, removed at teardown

	// Connection deadlines: a one-shot timerfd in the epoll set, armed for
	// the earliest deadline (timerAt, guarded by timerMu; 0: disarmed).
	timer   *handle
	timerMu sync.Mutex
	timerAt int64
	start   time.Time // Server.clock counts from here

	// TLS handshakes in progress (Config.TLS), each on its own goroutine
	// until it ends (tls_linux.go).
	handshakeMu sync.Mutex
	handshakes  map[*tlsConn]struct{}
	handshakeWG sync.WaitGroup

	listenerClosed atomic.Bool
	handlesMu      sync.RWMutex
	handles        map[int]*handle // by fd: the listener and every connection
	openConns      atomic.Int64
	lastGen        atomic.Uint32 // the newest registration generation (nextGen)

	// Polling and promotion (pool_linux.go).
	pollMu        sync.Mutex
	pollerPresent bool
	exiting       bool
	standbys      []chan struct{} // LIFO: top is the end; FIFO: head is [0]

	wg sync.WaitGroup // pool goroutines

	// probe is the tests' instrumentation; empty outside tests
	// (probe_off_linux.go).
	probe serverProbe

	// Gauges.
	polling, handling, onStandby, live atomic.Int64

	// Counters.
	events, stale, promotions, noStandby, accepts atomic.Uint64
	acceptPauses, refusedConns                    atomic.Uint64
	handshakeTimeouts, idleCloses                 atomic.Uint64
	tlsHandshakes, tlsErrors                      atomic.Uint64
	// acceptDelay is the current accept back-off; only the listener's
	// holder touches it.
	acceptDelay                                           time.Duration
	calls, handlerErrors, handlerPanics, connErrs, panics atomic.Uint64
}

// newServer is New with a comparison variant (NewVariant).
func newServer(reg *engine.Registry, cfg Config, v variant) (*Server, error) {
	if reg == nil {
		return nil, errors.New("lf: nil registry")
	}
	cfg, err := cfg.checked()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		reg:     reg,
		cfg:     cfg,
		variant: v,
		ctx:     ctx,
		cancel:  cancel,
		epfd:    -1,
		wakeFD:  -1,
		handles: map[int]*handle{},

		handshakes: map[*tlsConn]struct{}{},
		start:      time.Now(),
	}, nil
}

// Serve takes over ln (its descriptor is duplicated and ln is closed), runs
// the pool and blocks until the server is stopped. It returns nil after
// GracefulStop or Stop, ErrServerStopped if it was called after one of them
// or a second time, or the error that broke the pool.
func (s *Server) Serve(ln net.Listener) error {
	if ln == nil {
		return errors.New("lf: nil listener")
	}
	lfd, err := dupListener(ln)
	if ul, ok := ln.(*net.UnixListener); ok && err == nil {
		// Closing the original would unlink the socket file we go on
		// serving; teardown unlinks it instead.
		ul.SetUnlinkOnClose(false)
		if name := ul.Addr().String(); name != "" && name[0] != '@' {
			s.unixPath = name
		}
	}
	ln.Close()
	if err != nil {
		return err
	}

	s.lifeMu.Lock()
	if s.started || s.stopping.Load() {
		s.lifeMu.Unlock()
		unix.Close(lfd)
		return ErrServerStopped
	}
	s.started = true
	if err := s.setup(lfd); err != nil {
		s.closeSetup(lfd)
		s.tornDown = true
		s.done = make(chan struct{})
		close(s.done)
		s.lifeMu.Unlock()
		return err
	}
	s.done = make(chan struct{})
	s.wg.Add(s.cfg.Workers)
	for i := 0; i < s.cfg.Workers; i++ {
		go s.worker()
	}
	s.lifeMu.Unlock()

	s.wg.Wait()
	s.teardown()

	s.lifeMu.Lock()
	err = s.fatalErr
	s.lifeMu.Unlock()
	return err
}

func dupListener(ln net.Listener) (int, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return -1, errors.New("lf: listener has no file descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return -1, err
	}
	return nfd, nil
}

// setup creates the epoll set and the eventfd and registers the listener.
// Called with s.lifeMu held.
func (s *Server) setup(lfd int) error {
	var err error
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		s.epfd = -1
		return err
	}
	if !s.variant.blockingWait() {
		if err := unix.SetNonblock(s.epfd, true); err != nil {
			return err
		}
		// os.NewFile registers a non-blocking descriptor in the runtime
		// poller; the epoll set is readable while it holds ready events.
		s.epFile = os.NewFile(uintptr(s.epfd), "lf-epoll")
		if s.epRaw, err = s.epFile.SyscallConn(); err != nil {
			return err
		}
	}
	if s.wakeFD, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		s.wakeFD = -1
		return err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(s.wakeFD)}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, s.wakeFD, &ev); err != nil {
		return err
	}
	l, err := s.register(lfd, kindListener)
	if err != nil {
		return err
	}
	s.listener = l
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return err
	}
	s.timer, err = s.register(tfd, kindTimer)
	if err != nil {
		unix.Close(tfd)
	}
	return err
}

// register adds the listener or the timer to the table and the epoll set
// (readable, one-shot). Called with s.lifeMu held.
func (s *Server) register(fd int, k kind) (*handle, error) {
	h := &handle{fd: fd, gen: s.nextGen(), kind: k}
	h.want.Store(evListener)
	s.handles[fd] = h
	ev := unix.EpollEvent{Events: evListener, Fd: int32(fd), Pad: int32(h.gen)}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		delete(s.handles, fd)
		return nil, err
	}
	h.registered = true
	return h, nil
}

func (s *Server) closeSetup(lfd int) {
	unix.Close(lfd)
	if s.timer != nil {
		unix.Close(s.timer.fd)
	}
	if s.wakeFD >= 0 {
		unix.Close(s.wakeFD)
	}
	if s.epfd >= 0 {
		s.closeEpoll()
	}
	s.handles = map[int]*handle{}
	s.cancel()
}

// teardown runs once every pool goroutine has exited: it closes whatever is
// left and releases GracefulStop/Stop callers.
func (s *Server) teardown() {
	s.lifeMu.Lock()
	s.tornDown = true
	s.lifeMu.Unlock()
	s.sweeps.Wait()
	s.handshakeWG.Wait()

	s.handlesMu.Lock()
	left := make([]*handle, 0, len(s.handles))
	for fd, h := range s.handles {
		left = append(left, h)
		delete(s.handles, fd)
	}
	s.handlesMu.Unlock()
	for _, h := range left {
		switch h.kind {
		case kindConn:
			s.openConns.Add(-1)
		case kindListener:
			s.listenerClosed.Store(true)
		}
		s.closeFD(h)
	}
	unix.Close(s.wakeFD)
	s.closeEpoll()
	if s.unixPath != "" {
		_ = os.Remove(s.unixPath)
	}
	s.cancel()
	close(s.done)
}

// GracefulStop stops accepting connections, sends GOAWAY on every
// connection, lets the calls in flight finish, and returns once every
// connection is closed and every pool goroutine has exited.
func (s *Server) GracefulStop() {
	if !s.beginSweep(false) {
		return
	}
	s.abortHandshakes()
	if s.acquire(s.listener) {
		s.closeListener(s.listener)
	}
	for _, c := range s.connSnapshot() {
		if s.acquire(c) {
			s.runConn(c, func() bool { return false })
		}
	}
	s.maybeFinish()
	s.endSweep()
}

// Stop closes the listener and every connection at once, cancels the
// contexts of the calls in flight, and returns once every pool goroutine
// has exited.
func (s *Server) Stop() {
	if !s.beginSweep(true) {
		return
	}
	s.abortHandshakes()
	if s.acquire(s.listener) {
		s.closeListener(s.listener)
	}
	for _, c := range s.connSnapshot() {
		if s.acquire(c) {
			s.closeConn(c)
		}
	}
	s.wake()
	s.endSweep()
}

// beginSweep marks the server stopping (and stopped if hard) and reports
// whether a sweep over a running pool should follow. If not, it still
// waits for a finishing Serve.
func (s *Server) beginSweep(hard bool) bool {
	s.lifeMu.Lock()
	s.stopping.Store(true)
	if hard {
		s.stopped.Store(true)
		s.cancel()
	}
	done := s.done
	if !s.started || s.tornDown || done == nil {
		s.lifeMu.Unlock()
		if done != nil {
			<-done
		}
		return false
	}
	s.sweeps.Add(1)
	s.lifeMu.Unlock()
	return true
}

func (s *Server) endSweep() {
	s.sweeps.Done()
	<-s.done
}

// nextGen returns a fresh registration generation; 0 is kept for the
// eventfd.
func (s *Server) nextGen() uint32 {
	for {
		if g := s.lastGen.Add(1); g != 0 {
			return g
		}
	}
}

func (s *Server) connSnapshot() []*handle {
	s.handlesMu.RLock()
	defer s.handlesMu.RUnlock()
	out := make([]*handle, 0, len(s.handles))
	for _, h := range s.handles {
		if h.kind == kindConn {
			out = append(out, h)
		}
	}
	return out
}

// maybeFinish wakes the poller for the last time once a graceful stop has
// nothing left to drain.
func (s *Server) maybeFinish() {
	if s.stopping.Load() && s.listenerClosed.Load() && s.openConns.Load() == 0 {
		s.wake()
	}
}

// wake signals the eventfd, once. The poller that sees it ends the pool.
func (s *Server) wake() {
	if s.woken.Swap(true) {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		_, err := unix.Write(s.wakeFD, one[:])
		if err != unix.EINTR {
			return
		}
	}
}

// Stats returns a snapshot of the pool's gauges and counters.
func (s *Server) Stats() Stats {
	return Stats{
		Polling:           int(s.polling.Load()),
		Handling:          int(s.handling.Load()),
		Standby:           int(s.onStandby.Load()),
		Live:              int(s.live.Load()),
		Conns:             int(s.openConns.Load()),
		Events:            s.events.Load(),
		Stale:             s.stale.Load(),
		Promotions:        s.promotions.Load(),
		NoStandby:         s.noStandby.Load(),
		Accepts:           s.accepts.Load(),
		RefusedConns:      s.refusedConns.Load(),
		HandshakeTimeouts: s.handshakeTimeouts.Load(),
		TLSHandshakes:     s.tlsHandshakes.Load(),
		TLSErrors:         s.tlsErrors.Load(),
		IdleCloses:        s.idleCloses.Load(),
		Buffered:          s.cfg.Limits.Shared.Used(),
		AcceptPauses:      s.acceptPauses.Load(),
		Calls:             s.calls.Load(),
		HandlerErrors:     s.handlerErrors.Load(),
		HandlerPanics:     s.handlerPanics.Load(),
		ConnErrors:        s.connErrs.Load(),
		Panics:            s.panics.Load(),
	}
}

// closeEpoll closes the epoll set (through its os.File when it has one).
func (s *Server) closeEpoll() {
	if s.epFile != nil {
		s.epFile.Close()
		s.epFile, s.epRaw = nil, nil
	} else {
		unix.Close(s.epfd)
	}
	s.epfd = -1
}

// fail ends the pool after an unrecoverable epoll error.
func (s *Server) fail(err error) {
	s.lifeMu.Lock()
	if s.fatalErr == nil {
		s.fatalErr = err
	}
	s.stopping.Store(true)
	s.stopped.Store(true)
	s.cancel()
	s.lifeMu.Unlock()
	s.abortHandshakes()
	for _, c := range s.connSnapshot() {
		if s.acquire(c) {
			s.closeConn(c)
		}
	}
	if s.acquire(s.listener) {
		s.closeListener(s.listener)
	}
}
