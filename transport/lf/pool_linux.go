//go:build linux

package lf

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

type worker struct {
	wake  chan struct{}
	ev    []unix.EpollEvent // eventsPerWait() long
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
	if s.variant.lockOSThread() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	w := &worker{wake: make(chan struct{}, 1), buf: make([]byte, readChunk), ev: make([]unix.EpollEvent, s.variant.eventsPerWait())}
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
	for s.becomePoller(w.wake) {
		evs, ok := s.waitEvent(w)
		if !ok {
			return
		}
		exit := false
		for _, ev := range evs {
			if int(ev.Fd) == s.wakeFD && ev.Pad == 0 {
				exit = true
			}
		}
		if exit && len(evs) == 1 {
			s.exitAll()
			return
		}
		s.promote()
		s.handling.Add(1)
		for _, ev := range evs {
			// Every handle of the batch is disarmed (one-shot) and ours.
			if int(ev.Fd) != s.wakeFD || ev.Pad != 0 {
				s.dispatch(ev, w)
			}
		}
		s.handling.Add(-1)
		if exit {
			s.exitAll()
			return
		}
	}
}

// becomePoller returns once the caller is the poller, or false when the
// pool is exiting. While a poller is present the caller waits on standby.
func (s *Server) becomePoller(w chan struct{}) bool {
	s.pollMu.Lock()
	for s.pollerPresent && !s.exiting {
		s.standbys = append(s.standbys, w)
		s.onStandby.Add(1)
		s.pollMu.Unlock()
		<-w
		s.onStandby.Add(-1)
		s.pollMu.Lock()
	}
	if s.exiting {
		s.pollMu.Unlock()
		return false
	}
	s.pollerPresent = true
	s.pollMu.Unlock()
	return true
}

// promote gives up polling and wakes one standby goroutine to poll.
func (s *Server) promote() {
	s.pollMu.Lock()
	s.pollerPresent = false
	var w chan struct{}
	if n := len(s.standbys); n > 0 {
		if s.variant.fifo() {
			w = s.standbys[0]
			s.standbys[0] = nil
			s.standbys = s.standbys[1:]
		} else {
			w = s.standbys[n-1]
			s.standbys[n-1] = nil
			s.standbys = s.standbys[:n-1]
		}
	}
	s.pollMu.Unlock()
	if w == nil {
		s.noStandby.Add(1)
		return
	}
	s.promotions.Add(1)
	w <- struct{}{}
}

// exitAll ends the pool: the one broadcast, waking every standby goroutine
// to exit.
func (s *Server) exitAll() {
	s.pollMu.Lock()
	s.exiting = true
	s.pollerPresent = false
	ws := s.standbys
	s.standbys = nil
	s.pollMu.Unlock()
	for _, w := range ws {
		w <- struct{}{}
	}
}

// waitEvent is the poller's wait for one event (or up to EventsPerWait).
func (s *Server) waitEvent(w *worker) ([]unix.EpollEvent, bool) {
	s.polling.Add(1)
	defer s.polling.Add(-1)
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

func (s *Server) dispatch(ev unix.EpollEvent, w *worker) {
	s.handlesMu.RLock()
	h := s.handles[int(ev.Fd)]
	s.handlesMu.RUnlock()
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
