//go:build linux

package lf

import (
	"time"

	"golang.org/x/sys/unix"
)

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
// (after promoting a standby goroutine, like any event): it closes every connection
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
	for _, c := range s.connSnapshot() {
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
