//go:build linux

package lf

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electord/electord/internal/lfvariant"
	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

// Ownership states of a handle. A handle is armed while it waits in epoll
// and nobody touches it; whoever moves it armed→held (the pool goroutine
// that dispatched its event, or a shutdown sweep) is its only user until it
// stores armed again. A closed handle stays held forever.
const (
	stArmed int32 = iota
	stHeld
)

const (
	readChunk    = 64 << 10 // size of each pool goroutine's read buffer
	outHighWater = 1 << 20  // stop reading a conn while this much output waits
)

const (
	evConn     = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT
	evConnOut  = evConn | unix.EPOLLOUT
	evDraining = unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLONESHOT
	evListener = unix.EPOLLIN | unix.EPOLLONESHOT
	evReadable = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR
)

type kind uint8

const (
	kindConn kind = iota
	kindListener
	kindTimer // the timerfd of the connection deadlines
)

// handle is a file descriptor registered in the epoll set: the listener or
// one connection.
type handle struct {
	fd   int
	gen  uint32 // registration generation, carried in the event's Pad
	kind kind

	state atomic.Int32  // stArmed / stHeld
	want  atomic.Uint32 // events to arm with, set by the owner before releasing
	probe handleProbe   // empty outside tests (probe_off_linux.go)

	// fdMu guards the descriptor's lifetime: a re-arm that trails a
	// release must not reach a descriptor that was closed (and whose number
	// may already belong to another connection).
	fdMu       sync.Mutex
	registered bool // EPOLL_CTL_ADD done
	closed     bool

	// Owner-only fields (connections).
	sess   *engine.Session
	tls    *tlsConn // nil on a plain connection
	goaway bool
	// Deadlines, in nanoseconds since the server started (Server.clock):
	// until the handshake is done, when the connection was accepted (for
	// the handshake timeout); then when the last sweep saw it active (for
	// the idle timeout). active says bytes arrived since the last sweep.
	since          int64
	active, idling bool // idling: since counts idle time, not the handshake
}

// acquire moves h from armed to held. It fails when somebody else holds h:
// the event being dispatched is stale or spurious and is dropped.
func (s *Server) acquire(h *handle) bool {
	if !h.state.CompareAndSwap(stArmed, stHeld) {
		return false
	}
	s.probe.acquired(h)
	return true
}

// disown gives h up; the caller must re-arm it (or let the taker that
// reacquires it do so) right after.
func (s *Server) disown(h *handle) {
	s.probe.released(h)
	h.state.Store(stArmed)
}

// Server is a Leader/Followers pool serving gRPC (through engine) on one
// listener. See the package comment.
type Server struct {
	reg    *engine.Registry
	cfg    Config
	v      lfvariant.Variant // the zero Variant but in comparison runs
	ctx    context.Context   // base context of every call; Stop cancels it
	cancel context.CancelFunc

	// Lifecycle.
	life     sync.Mutex
	started  bool
	torn     bool           // teardown began; sweeps may no longer start
	sweeps   sync.WaitGroup // shutdown sweeps in progress
	done     chan struct{}  // closed when Serve finished tearing down
	fatalErr error
	stopping atomic.Bool // GracefulStop or Stop called
	stopped  atomic.Bool // Stop called: close everything now
	woken    atomic.Bool // the eventfd was signalled

	// Set up by Serve before the pool starts; read-only afterwards.
	epfd     int
	epFile   *os.File        // epfd, registered in the runtime poller (unless v.BlockingWait)
	epRaw    syscall.RawConn // epFile's
	efd      int
	lis      *handle
	unixPath string // socket file of a Unix listener, removed at teardown

	// Connection deadlines: a one-shot timerfd in the epoll set, armed for
	// the earliest deadline (timerAt, guarded by timerMu; 0: disarmed).
	timer   *handle
	timerMu sync.Mutex
	timerAt int64
	start   time.Time // Server.clock counts from here

	// TLS handshakes in progress (Config.TLS), each on its own goroutine
	// until it ends (tls_linux.go).
	hsMu    sync.Mutex
	hsConns map[*tlsConn]struct{}
	hsWG    sync.WaitGroup

	lisClosed atomic.Bool
	tabMu     sync.RWMutex
	tab       map[int]*handle // by fd: the listener and every connection
	nconns    atomic.Int64
	gen       atomic.Uint32

	// Promotion protocol.
	lfMu          sync.Mutex
	leaderPresent bool
	exiting       bool
	waiters       []chan struct{} // LIFO: top is the end; FIFO: head is [0]

	wg sync.WaitGroup // pool goroutines

	// probe is the tests' instrumentation; empty outside tests
	// (probe_off_linux.go).
	probe serverProbe

	// Gauges.
	leaders, processing, followers, live atomic.Int64

	// Counters.
	events, stale, promotions, noFollower, accepts atomic.Uint64
	acceptPauses, refusedConns                     atomic.Uint64
	handshakeTimeouts, idleCloses                  atomic.Uint64
	tlsHandshakes, tlsErrors                       atomic.Uint64
	// acceptDelay is the current accept back-off; only the listener's
	// holder touches it.
	acceptDelay                                           time.Duration
	calls, handlerErrors, handlerPanics, connErrs, panics atomic.Uint64
}

// newServer is New with a comparison variant (lfvariant.New).
func newServer(reg *engine.Registry, cfg Config, v lfvariant.Variant) (*Server, error) {
	if reg == nil {
		return nil, errors.New("lf: nil registry")
	}
	cfg, err := cfg.checked()
	if err != nil {
		return nil, err
	}
	if v, err = variantDefaults(v); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		reg:    reg,
		cfg:    cfg,
		v:      v,
		ctx:    ctx,
		cancel: cancel,
		epfd:   -1,
		efd:    -1,
		tab:    map[int]*handle{},

		hsConns: map[*tlsConn]struct{}{},
		start:   time.Now(),
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

	s.life.Lock()
	if s.started || s.stopping.Load() {
		s.life.Unlock()
		unix.Close(lfd)
		return ErrServerStopped
	}
	s.started = true
	if err := s.setup(lfd); err != nil {
		s.closeSetup(lfd)
		s.torn = true
		s.done = make(chan struct{})
		close(s.done)
		s.life.Unlock()
		return err
	}
	s.done = make(chan struct{})
	s.wg.Add(s.cfg.Workers)
	for i := 0; i < s.cfg.Workers; i++ {
		go s.worker()
	}
	s.life.Unlock()

	s.wg.Wait()
	s.teardown()

	s.life.Lock()
	err = s.fatalErr
	s.life.Unlock()
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
// Called with s.life held.
func (s *Server) setup(lfd int) error {
	var err error
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		s.epfd = -1
		return err
	}
	if !s.v.BlockingWait {
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
	if s.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		s.efd = -1
		return err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(s.efd)}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, s.efd, &ev); err != nil {
		return err
	}
	l, err := s.register(lfd, kindListener)
	if err != nil {
		return err
	}
	s.lis = l
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
// (readable, one-shot). Called with s.life held.
func (s *Server) register(fd int, k kind) (*handle, error) {
	h := &handle{fd: fd, gen: s.nextGen(), kind: k}
	h.want.Store(evListener)
	s.tab[fd] = h
	ev := unix.EpollEvent{Events: evListener, Fd: int32(fd), Pad: int32(h.gen)}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		delete(s.tab, fd)
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
	if s.efd >= 0 {
		unix.Close(s.efd)
	}
	if s.epfd >= 0 {
		s.closeEpoll()
	}
	s.tab = map[int]*handle{}
	s.cancel()
}

// teardown runs once every pool goroutine has exited: it closes whatever is
// left and releases GracefulStop/Stop callers.
func (s *Server) teardown() {
	s.life.Lock()
	s.torn = true
	s.life.Unlock()
	s.sweeps.Wait()
	s.hsWG.Wait()

	s.tabMu.Lock()
	left := make([]*handle, 0, len(s.tab))
	for fd, h := range s.tab {
		left = append(left, h)
		delete(s.tab, fd)
	}
	s.tabMu.Unlock()
	for _, h := range left {
		switch h.kind {
		case kindConn:
			s.nconns.Add(-1)
		case kindListener:
			s.lisClosed.Store(true)
		}
		s.closeFD(h)
	}
	unix.Close(s.efd)
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
	if s.acquire(s.lis) {
		s.closeListener(s.lis)
	}
	for _, c := range s.snapshot() {
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
	if s.acquire(s.lis) {
		s.closeListener(s.lis)
	}
	for _, c := range s.snapshot() {
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
	s.life.Lock()
	s.stopping.Store(true)
	if hard {
		s.stopped.Store(true)
		s.cancel()
	}
	done := s.done
	if !s.started || s.torn || done == nil {
		s.life.Unlock()
		if done != nil {
			<-done
		}
		return false
	}
	s.sweeps.Add(1)
	s.life.Unlock()
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
		if g := s.gen.Add(1); g != 0 {
			return g
		}
	}
}

func (s *Server) snapshot() []*handle {
	s.tabMu.RLock()
	defer s.tabMu.RUnlock()
	out := make([]*handle, 0, len(s.tab))
	for _, h := range s.tab {
		if h.kind == kindConn {
			out = append(out, h)
		}
	}
	return out
}

// maybeFinish wakes the leader for the last time once a graceful stop has
// nothing left to drain.
func (s *Server) maybeFinish() {
	if s.stopping.Load() && s.lisClosed.Load() && s.nconns.Load() == 0 {
		s.wake()
	}
}

// wake signals the eventfd, once. The leader that sees it ends the pool.
func (s *Server) wake() {
	if s.woken.Swap(true) {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		_, err := unix.Write(s.efd, one[:])
		if err != unix.EINTR {
			return
		}
	}
}

// Stats returns a snapshot of the pool's gauges and counters.
func (s *Server) Stats() Stats {
	return Stats{
		Leaders:           int(s.leaders.Load()),
		Processing:        int(s.processing.Load()),
		Followers:         int(s.followers.Load()),
		Live:              int(s.live.Load()),
		Conns:             int(s.nconns.Load()),
		Events:            s.events.Load(),
		Stale:             s.stale.Load(),
		Promotions:        s.promotions.Load(),
		NoFollower:        s.noFollower.Load(),
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

// ---- the pool ----

type worker struct {
	wake  chan struct{}
	ev    []unix.EpollEvent // EventsPerWait long
	buf   []byte
	calls []*engine.Call

	// The poller callback of epollWait and what it found, made once so
	// that a wait allocates nothing.
	poll    func(uintptr) bool
	got     int
	pollErr error
}

func (s *Server) worker() {
	defer s.wg.Done()
	s.live.Add(1)
	defer s.live.Add(-1)
	if s.v.LockOSThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	w := &worker{wake: make(chan struct{}, 1), buf: make([]byte, readChunk), ev: make([]unix.EpollEvent, s.v.EventsPerWait)}
	w.poll = func(uintptr) bool {
		for {
			w.got, w.pollErr = s.epollWait1(w, 0)
			if w.pollErr != unix.EINTR {
				break
			}
		}
		// false: nothing ready; park until the set is readable again (the
		// poller is edge-triggered, so only an empty set may park).
		return w.got > 0 || w.pollErr != nil
	}
	for s.lead(w.wake) {
		evs, ok := s.waitEvent(w)
		if !ok {
			return
		}
		exit := false
		for _, ev := range evs {
			if int(ev.Fd) == s.efd && ev.Pad == 0 {
				exit = true
			}
		}
		if exit && len(evs) == 1 {
			s.exitAll()
			return
		}
		s.promote()
		s.processing.Add(1)
		for _, ev := range evs {
			// Every handle of the batch is disarmed (one-shot) and ours.
			if int(ev.Fd) != s.efd || ev.Pad != 0 {
				s.dispatch(ev, w)
			}
		}
		s.processing.Add(-1)
		if exit {
			s.exitAll()
			return
		}
	}
}

// lead returns once the caller is the leader, or false when the pool is
// exiting. While a leader is present the caller waits as a follower.
func (s *Server) lead(w chan struct{}) bool {
	s.lfMu.Lock()
	for s.leaderPresent && !s.exiting {
		s.waiters = append(s.waiters, w)
		s.followers.Add(1)
		s.lfMu.Unlock()
		<-w
		s.followers.Add(-1)
		s.lfMu.Lock()
	}
	if s.exiting {
		s.lfMu.Unlock()
		return false
	}
	s.leaderPresent = true
	s.lfMu.Unlock()
	return true
}

// promote gives up leadership and wakes one follower to take it.
func (s *Server) promote() {
	s.lfMu.Lock()
	s.leaderPresent = false
	var w chan struct{}
	if n := len(s.waiters); n > 0 {
		if s.v.FIFO {
			w = s.waiters[0]
			s.waiters[0] = nil
			s.waiters = s.waiters[1:]
		} else {
			w = s.waiters[n-1]
			s.waiters[n-1] = nil
			s.waiters = s.waiters[:n-1]
		}
	}
	s.lfMu.Unlock()
	if w == nil {
		s.noFollower.Add(1)
		return
	}
	s.promotions.Add(1)
	w <- struct{}{}
}

// exitAll ends the pool: the one broadcast, waking every follower to exit.
func (s *Server) exitAll() {
	s.lfMu.Lock()
	s.exiting = true
	s.leaderPresent = false
	ws := s.waiters
	s.waiters = nil
	s.lfMu.Unlock()
	for _, w := range ws {
		w <- struct{}{}
	}
}

// waitEvent is the leader's wait for one event (or up to EventsPerWait).
func (s *Server) waitEvent(w *worker) ([]unix.EpollEvent, bool) {
	s.leaders.Add(1)
	defer s.leaders.Add(-1)
	for {
		got, err := s.epollWait(w)
		if err == unix.EINTR || (err == nil && got == 0) {
			continue
		}
		if err != nil {
			s.fail(err)
			s.exitAll()
			return nil, false
		}
		s.events.Add(uint64(got))
		return w.ev[:got], true
	}
}

// epollWait asks the set for one event: blocking (BlockingWait), or parked
// in the runtime poller until the set is readable and then without
// blocking.
func (s *Server) epollWait(w *worker) (got int, err error) {
	if s.epRaw == nil {
		return s.epollWait1(w, -1)
	}
	w.got, w.pollErr = 0, nil
	rerr := s.epRaw.Read(w.poll)
	if w.pollErr == nil && rerr != nil {
		return w.got, rerr
	}
	return w.got, w.pollErr
}

// epollWait1 is the epoll_wait system call. At most one goroutine may ever
// be inside it (the tests' probe counts).
func (s *Server) epollWait1(w *worker, msec int) (int, error) {
	s.probe.enterEpoll()
	var got int
	var err error
	if msec == 0 {
		got, err = rawsys.EpollWait0(s.epfd, w.ev[:])
	} else {
		got, err = unix.EpollWait(s.epfd, w.ev[:], msec)
	}
	s.probe.leaveEpoll()
	return got, err
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
	s.life.Lock()
	if s.fatalErr == nil {
		s.fatalErr = err
	}
	s.stopping.Store(true)
	s.stopped.Store(true)
	s.cancel()
	s.life.Unlock()
	s.abortHandshakes()
	for _, c := range s.snapshot() {
		if s.acquire(c) {
			s.closeConn(c)
		}
	}
	if s.acquire(s.lis) {
		s.closeListener(s.lis)
	}
}

func (s *Server) dispatch(ev unix.EpollEvent, w *worker) {
	s.tabMu.RLock()
	h := s.tab[int(ev.Fd)]
	s.tabMu.RUnlock()
	if h == nil || h.gen != uint32(ev.Pad) || !s.acquire(h) {
		s.stale.Add(1)
		return
	}
	switch h.kind {
	case kindListener:
		s.acceptAll(h)
		return
	case kindTimer:
		s.sweepDeadlines(h)
		return
	}
	s.runConn(h, func() bool { return s.connEvent(h, ev.Events, w) })
}

// ---- the listener ----

func (s *Server) acceptAll(l *handle) {
	pause := false
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
		}
		if pause {
			// Out of descriptors: the pending connection keeps the
			// listener readable, so re-arming now would spin the leader.
			// Keep holding it for a back-off, as net/http's Serve does.
			s.acceptDelay = min(max(2*s.acceptDelay, 5*time.Millisecond), time.Second)
			time.AfterFunc(s.acceptDelay, func() { s.settleListener(l) })
			return
		}
		s.settleListener(l)
	}()
	for !s.stopping.Load() {
		nfd, sa, err := s.probe.accept4(l.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch err {
		case nil:
		case unix.EINTR, unix.ECONNABORTED:
			continue
		case unix.EAGAIN:
			return
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			s.connErrs.Add(1)
			s.acceptPauses.Add(1)
			pause = true
			return
		default:
			s.connErrs.Add(1)
			return
		}
		s.acceptDelay = 0
		s.accepts.Add(1)
		if s.nconns.Load() >= int64(s.cfg.MaxConns) {
			s.refusedConns.Add(1)
			unix.Close(nfd)
			continue
		}
		s.newConn(nfd, sa)
	}
}

func (s *Server) newConn(fd int, sa unix.Sockaddr) {
	switch sa.(type) {
	case *unix.SockaddrInet4, *unix.SockaddrInet6:
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	c := &handle{fd: fd, gen: s.nextGen(), kind: kindConn}
	c.since = s.clock()
	first := s.cfg.HandshakeTimeout
	if s.cfg.IdleTimeout > 0 {
		first = min(first, s.cfg.IdleTimeout)
	}
	s.schedule(c.since + int64(first))
	c.state.Store(stHeld)
	s.probe.acquired(c)
	s.tabMu.Lock()
	s.tab[fd] = c
	s.tabMu.Unlock()
	s.nconns.Add(1)
	if s.cfg.TLS != nil {
		s.startTLS(c, rawsys.Addr(sa))
		return
	}
	s.runConn(c, func() bool {
		c.sess = engine.NewSession(s.reg, s.cfg.Limits, rawsys.Addr(sa))
		return s.flush(c) != nil
	})
}

// settleListener re-arms the listener, or closes it once stopping.
func (s *Server) settleListener(l *handle) {
	for {
		if s.stopping.Load() {
			s.closeListener(l)
			return
		}
		s.disown(l)
		if s.stopping.Load() {
			// A sweep may have missed it while we held it.
			if s.acquire(l) {
				continue
			}
			return
		}
		s.arm(l)
		return
	}
}

func (s *Server) closeListener(l *handle) {
	s.tabMu.Lock()
	if s.tab[l.fd] == l {
		delete(s.tab, l.fd)
	}
	s.tabMu.Unlock()
	s.probe.released(l)
	s.closeFD(l)
	s.lisClosed.Store(true)
	s.maybeFinish()
}

// ---- connections ----

// runConn runs work on the held connection c, then re-arms or closes it. A
// panic closes c and is counted; it never reaches the pool goroutine.
func (s *Server) runConn(c *handle, work func() (closeNow bool)) {
	released := false
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			if !released {
				s.closeConn(c)
			}
		}
	}()
	closeNow := work()
	s.settle(c, closeNow, &released)
}

// connEvent reads (up to the budget), feeds the session, runs the calls
// inline and writes the answers. It reports whether c must close.
func (s *Server) connEvent(c *handle, events uint32, w *worker) bool {
	eof, closeNow := false, false
	switch {
	case c.tls != nil:
		if events&evReadable != 0 || c.tls.more {
			eof, closeNow = s.readTLS(c, w)
		}
	case events&evReadable != 0:
		eof, closeNow = s.readPlain(c, w)
	}
	if closeNow || s.runCalls(c, w) != nil {
		return true
	}
	return s.flush(c) != nil || eof
}

// feed hands p to c's Session; it reports whether c must close.
func (s *Server) feed(c *handle, p []byte) bool {
	c.active = true
	s.probe.feed(p)
	if err := c.sess.Feed(p); err != nil {
		if !errors.Is(err, engine.ErrGoAway) {
			s.connErrs.Add(1)
		}
		s.flush(c)
		return true
	}
	return false
}

// readPlain reads up to the read budget and feeds the Session.
func (s *Server) readPlain(c *handle, w *worker) (eof, closeNow bool) {
	for total := 0; total < s.cfg.ReadBudget; {
		buf := w.buf
		if rest := s.cfg.ReadBudget - total; rest < len(buf) {
			buf = buf[:rest]
		}
		n, err := rawsys.Read(c.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			s.connErrs.Add(1)
			return false, true
		}
		if n == 0 {
			return true, false
		}
		total += n
		if s.feed(c, buf[:n]) {
			return false, true
		}
		if n < len(buf) {
			// The socket is drained for now: skip the read that
			// would only say EAGAIN; the level-triggered re-arm
			// reports anything that arrives later.
			break
		}
	}
	return false, false
}

var errStopped = errors.New("lf: stopped")

// runCalls runs every ready call of c inline, then writes their answers.
func (s *Server) runCalls(c *handle, w *worker) error {
	w.calls = c.sess.TakeCalls(w.calls[:0])
	stopped := false
	for i, call := range w.calls {
		w.calls[i] = nil
		call.Run(s.ctx)
		s.calls.Add(1)
		if call.Panicked() {
			s.handlerPanics.Add(1)
		} else if call.Err() != nil {
			s.handlerErrors.Add(1)
		}
		if s.stopped.Load() {
			// Stop cancelled the call; the peer learns of it from the
			// connection closing, not from a cancelled answer.
			stopped = true
			continue
		}
		if s.stopping.Load() && !c.goaway {
			// GracefulStop began while the handler ran: GOAWAY goes out
			// ahead of the answer.
			c.goaway = true
			c.sess.GoAway()
		}
		c.sess.Finish(call)
	}
	if stopped {
		return errStopped
	}
	// One write for every answer of the batch: a write to a socket costs
	// several times a call's own work (loopback delivers it to the peer in
	// the same system call), so answering per call would triple the cost.
	return s.flush(c)
}

// flush writes c's output until it is empty or the socket is full.
func (s *Server) flush(c *handle) error {
	var err error
	if c.tls != nil {
		err = c.tls.flush(c.sess)
	} else {
		_, err = rawsys.Flush(c.fd, c.sess)
	}
	if err != nil {
		s.connErrs.Add(1)
	}
	return err
}

// settle ends the caller's hold on c: it closes c, or sends GOAWAY when the
// server is stopping, and re-arms c with the events it now needs.
func (s *Server) settle(c *handle, closeNow bool, released *bool) {
	for {
		if closeNow || s.stopped.Load() {
			s.closeConn(c)
			*released = true
			return
		}
		if s.stopping.Load() && !c.goaway {
			c.goaway = true
			c.sess.GoAway()
			if s.flush(c) != nil {
				closeNow = true
				continue
			}
		}
		out := len(c.sess.Output())
		more := false
		if c.tls != nil {
			out += len(c.tls.Output())
			more = c.tls.more
		}
		done := c.sess.Done()
		if done && out == 0 {
			closeNow = true
			continue
		}
		var want uint32
		switch {
		case done || out >= outHighWater:
			want = evDraining
		case out > 0 || more:
			// more: TLS records wait in the record layer; EPOLLOUT is
			// ready at once, so the next leader reads them.
			want = evConnOut
		default:
			want = evConn
			c.sess.Release()
			if c.tls != nil {
				c.tls.release()
			}
		}
		goaway := c.goaway
		c.want.Store(want)
		s.disown(c)
		// From here c is not ours. Re-check against a shutdown sweep that
		// may have skipped c while we held it.
		if s.stopped.Load() || (s.stopping.Load() && !goaway) {
			if s.acquire(c) {
				continue
			}
			*released = true
			return
		}
		*released = true
		s.arm(c)
		return
	}
}

// arm (re-)registers h in the epoll set with the events its last owner
// asked for. It may run after h changed hands; the latest wish wins and a
// redundant arm only costs a spurious event.
func (s *Server) arm(h *handle) {
	h.fdMu.Lock()
	if h.closed {
		h.fdMu.Unlock()
		return
	}
	ev := unix.EpollEvent{Events: h.want.Load(), Fd: int32(h.fd), Pad: int32(h.gen)}
	op := unix.EPOLL_CTL_MOD
	if !h.registered {
		op = unix.EPOLL_CTL_ADD
	}
	err := rawsys.EpollCtl(s.epfd, op, h.fd, &ev)
	if err == nil {
		h.registered = true
	}
	h.fdMu.Unlock()
	if err != nil && h.kind == kindConn && s.acquire(h) {
		s.connErrs.Add(1)
		s.closeConn(h)
	}
}

// closeConn closes the held connection c and drops it from the table.
func (s *Server) closeConn(c *handle) {
	s.tabMu.Lock()
	removed := s.tab[c.fd] == c
	if removed {
		delete(s.tab, c.fd)
	}
	s.tabMu.Unlock()
	s.closeFD(c)
	if removed {
		s.probe.released(c)
		s.nconns.Add(-1)
		s.maybeFinish()
	}
}

// closeFD removes h from the epoll set and closes it, once.
func (s *Server) closeFD(h *handle) {
	h.fdMu.Lock()
	defer h.fdMu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	if h.registered {
		_ = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, h.fd, nil)
	}
	unix.Close(h.fd)
}

// ---- connection deadlines ----

// clock returns the nanoseconds since the server started (monotonic).
func (s *Server) clock() int64 { return int64(time.Since(s.start)) }

// sweepGrain is the granularity of the deadline timer: deadlines are
// rounded up to it, so that connections accepted close together are swept
// together instead of one sweep each.
func (s *Server) sweepGrain() int64 {
	g := s.cfg.HandshakeTimeout
	if s.cfg.IdleTimeout > 0 {
		g = min(g, s.cfg.IdleTimeout)
	}
	return int64(min(max(g/8, 10*time.Millisecond), time.Second))
}

// schedule makes the timer fire at the deadline at (rounded up to the
// sweep grain) unless it is already due to fire earlier.
func (s *Server) schedule(at int64) {
	g := s.sweepGrain()
	at = (at + g - 1) / g * g
	s.timerMu.Lock()
	defer s.timerMu.Unlock()
	if s.timerAt != 0 && s.timerAt <= at {
		return
	}
	s.timerAt = at
	d := max(at-s.clock(), int64(time.Millisecond))
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d)}
	_ = unix.TimerfdSettime(s.timer.fd, 0, &spec, nil)
}

// sweepDeadlines runs on the pool goroutine that got the timer's event
// (after promoting a follower, like any event): it closes every connection
// whose handshake or idle deadline passed, and re-arms the timer for the
// next deadline. A connection that is busy right now is not idle; it is
// looked at again one grain later.
func (s *Server) sweepDeadlines(tm *handle) {
	var buf [8]byte
	_, _ = unix.Read(tm.fd, buf[:])
	s.timerMu.Lock()
	s.timerAt = 0
	s.timerMu.Unlock()
	now := s.clock()
	next := int64(0)
	soonest := func(at int64) {
		if next == 0 || at < next {
			next = at
		}
	}
	for _, c := range s.snapshot() {
		if !s.acquire(c) {
			soonest(now + s.sweepGrain())
			continue
		}
		s.runConn(c, func() bool {
			if c.sess == nil {
				return false
			}
			if !c.sess.Handshaken() {
				if now-c.since >= int64(s.cfg.HandshakeTimeout) {
					s.handshakeTimeouts.Add(1)
					return true
				}
				soonest(c.since + int64(s.cfg.HandshakeTimeout))
				return false
			}
			if s.cfg.IdleTimeout <= 0 {
				return false
			}
			if c.active || !c.idling || c.sess.Open() > 0 {
				c.active, c.idling, c.since = false, true, now
			} else if now-c.since >= int64(s.cfg.IdleTimeout) && !c.goaway {
				s.idleCloses.Add(1)
				c.goaway = true
				c.sess.GoAway() // no open stream: Done, closed once flushed
				return s.flush(c) != nil
			}
			soonest(c.since + int64(s.cfg.IdleTimeout))
			return false
		})
	}
	if next != 0 {
		s.schedule(next)
	}
	s.settleTimer(tm)
}

// settleTimer re-arms the timer's descriptor, or leaves it to teardown once
// the server is stopping.
func (s *Server) settleTimer(tm *handle) {
	s.disown(tm)
	if s.stopping.Load() {
		return
	}
	s.arm(tm)
}
