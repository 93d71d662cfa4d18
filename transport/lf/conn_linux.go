//go:build linux

package lf

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

const (
	readChunk    = 64 << 10 // size of each pool goroutine's read buffer
	outHighWater = 1 << 20  // stop reading a conn while this much output waits
)

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
			// ready at once, so the next poller reads them.
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

// closeConn closes the held connection c and drops it from the table.
func (s *Server) closeConn(c *handle) {
	s.handlesMu.Lock()
	removed := s.handles[c.fd] == c
	if removed {
		delete(s.handles, c.fd)
	}
	s.handlesMu.Unlock()
	s.closeFD(c)
	if removed {
		s.probe.released(c)
		s.openConns.Add(-1)
		s.maybeFinish()
	}
}
