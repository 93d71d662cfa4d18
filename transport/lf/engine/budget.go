package engine

import (
	"encoding/binary"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// setResv sets stream x's share of the connection's buffer budget.
func (s *Session) setResv(x *stream, v int64) {
	s.reserved += v - x.resv
	x.resv = v
}

// grow makes room in x.body for n more bytes, charging Limits.Shared for
// what is allocated beyond the inline buffer. It reports false when Shared
// has no room.
func (s *Session) grow(x *stream, n int) bool {
	if x.body == nil {
		x.body = x.bodyInline[:0]
	}
	need := len(x.body) + n
	if need <= cap(x.body) {
		return true
	}
	c := max(need, 2*cap(x.body), 512)
	if len(x.body) >= 5 {
		c = min(c, 5+int(binary.BigEndian.Uint32(x.body[1:5])))
	}
	return s.realloc(x, max(c, need))
}

// realloc moves x.body into an array of c bytes, charging Shared.
func (s *Session) realloc(x *stream, c int) bool {
	if !s.lim.Shared.take(int64(c) - x.charged) {
		return false
	}
	b := make([]byte, len(x.body), c)
	copy(b, x.body)
	x.body, x.charged = b, int64(c)
	return true
}

// widen grants stream x the window the rest of its message needs, in one
// WINDOW_UPDATE, if the connection's budget (ConnBufferBytes) and Shared
// have room for it; otherwise x waits until streams end, or fails with
// ResourceExhausted when no stream could free enough.
func (s *Session) widen(x *stream, size int) {
	rest := int64(5+size-len(x.body)) - x.recvWindow
	if rest <= 0 {
		return
	}
	if s.reserved+rest+s.unopened(len(s.streams)) > int64(s.lim.ConnBufferBytes) {
		// Streams not yet opened keep their initial windows' worth: the
		// client may open them and fill those windows at any time.
		held, n := s.waitedFor()
		if !x.waiting {
			held, n = held+x.resv, n+1
		}
		if held+rest+s.unopened(n) > int64(s.lim.ConnBufferBytes) {
			s.answer(x, status.Newf(codes.ResourceExhausted, "engine: a %d-byte message does not fit the connection's request buffers (%d bytes)", size, s.lim.ConnBufferBytes), nil)
			return
		}
		if !x.waiting {
			x.waiting = true
			s.h().waiting = append(s.h().waiting, x.id)
		}
		return
	}
	if !s.realloc(x, 5+size) {
		s.answer(x, status.New(codes.ResourceExhausted, "engine: the server's request buffers are full"), nil)
		return
	}
	_ = s.framer().WriteWindowUpdate(x.id, uint32(rest))
	x.recvWindow += rest
	s.setResv(x, int64(len(x.body))+x.recvWindow)
}

// waitedFor is the budget held by the streams waiting for window, and how
// many they are: what stays taken if every other stream ends.
func (s *Session) waitedFor() (int64, int) {
	var held int64
	n := 0
	if s.hist == nil {
		return 0, 0
	}
	for _, id := range s.hist.waiting {
		if x := s.streams[id]; x != nil && x.waiting {
			held += x.resv
			n++
		}
	}
	return held, n
}

// unopened is the initial windows' worth of the streams the client may
// still open when open streams are.
func (s *Session) unopened(open int) int64 {
	return max(int64(s.lim.MaxConcurrentStreams)-int64(open), 0) * int64(s.lim.StreamWindow)
}

// retryWaiting gives waiting streams, oldest first, the window that ended
// streams freed.
func (s *Session) retryWaiting() {
	if s.hist == nil || len(s.hist.waiting) == 0 {
		return
	}
	ids := s.hist.waiting
	s.hist.waiting = nil
	for _, id := range ids {
		x := s.streams[id]
		if x == nil || !x.waiting {
			continue
		}
		x.waiting = false
		if !x.answered && !x.endRecv && len(x.body) >= 5 {
			s.widen(x, int(binary.BigEndian.Uint32(x.body[1:5])))
		}
	}
}

// release gives back what stream x holds of the connection's and the
// server's buffer budgets.
func (s *Session) release(x *stream) {
	s.setResv(x, 0)
	s.lim.Shared.give(x.charged)
	x.charged = 0
	if x.waiting {
		x.waiting = false
	}
}
