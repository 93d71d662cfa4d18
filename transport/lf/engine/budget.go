package engine

import (
	"encoding/binary"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// setReserved sets strm's share of the connection's buffer budget.
func (s *Session) setReserved(strm *stream, v int64) {
	s.reserved += v - strm.reserved
	strm.reserved = v
}

// grow makes room in strm.body for n more bytes, charging Limits.Shared for
// what is allocated beyond the inline buffer. It reports false when Shared
// has no room.
func (s *Session) grow(strm *stream, n int) bool {
	if strm.body == nil {
		strm.body = strm.bodyInline[:0]
	}
	need := len(strm.body) + n
	if need <= cap(strm.body) {
		return true
	}
	c := max(need, 2*cap(strm.body), 512)
	if len(strm.body) >= 5 {
		c = min(c, 5+int(binary.BigEndian.Uint32(strm.body[1:5])))
	}
	return s.realloc(strm, max(c, need))
}

// realloc moves strm.body into an array of c bytes, charging Shared.
func (s *Session) realloc(strm *stream, c int) bool {
	if !s.lim.Shared.take(int64(c) - strm.charged) {
		return false
	}
	b := make([]byte, len(strm.body), c)
	copy(b, strm.body)
	strm.body, strm.charged = b, int64(c)
	return true
}

// widen grants strm the window the rest of its message needs, in one
// WINDOW_UPDATE, if the connection's budget (ConnBufferBytes) and Shared
// have room for it; otherwise strm waits until streams end, or fails with
// ResourceExhausted when no stream could free enough.
func (s *Session) widen(strm *stream, size int) {
	rest := int64(5+size-len(strm.body)) - strm.recvWindow
	if rest <= 0 {
		return
	}
	if s.reserved+rest+s.unopened(len(s.streams)) > int64(s.lim.ConnBufferBytes) {
		// Streams not yet opened keep their initial windows' worth: the
		// client may open them and fill those windows at any time.
		held, n := s.waitedFor()
		if !strm.waiting {
			held, n = held+strm.reserved, n+1
		}
		if held+rest+s.unopened(n) > int64(s.lim.ConnBufferBytes) {
			s.answer(strm, status.Newf(codes.ResourceExhausted, "engine: a %d-byte message does not fit the connection's request buffers (%d bytes)", size, s.lim.ConnBufferBytes), nil)
			return
		}
		if !strm.waiting {
			strm.waiting = true
			s.ensureHistory().waiting = append(s.ensureHistory().waiting, strm.id)
		}
		return
	}
	if !s.realloc(strm, 5+size) {
		s.answer(strm, status.New(codes.ResourceExhausted, "engine: the server's request buffers are full"), nil)
		return
	}
	_ = s.framer().WriteWindowUpdate(strm.id, uint32(rest))
	strm.recvWindow += rest
	s.setReserved(strm, int64(len(strm.body))+strm.recvWindow)
}

// waitedFor is the budget held by the streams waiting for window, and how
// many they are: what stays taken if every other stream ends.
func (s *Session) waitedFor() (int64, int) {
	var held int64
	n := 0
	if s.history == nil {
		return 0, 0
	}
	for _, id := range s.history.waiting {
		if strm := s.streams[id]; strm != nil && strm.waiting {
			held += strm.reserved
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
	if s.history == nil || len(s.history.waiting) == 0 {
		return
	}
	ids := s.history.waiting
	s.history.waiting = nil
	for _, id := range ids {
		strm := s.streams[id]
		if strm == nil || !strm.waiting {
			continue
		}
		strm.waiting = false
		if !strm.answered && !strm.endRecv && len(strm.body) >= 5 {
			s.widen(strm, int(binary.BigEndian.Uint32(strm.body[1:5])))
		}
	}
}

// release gives back what strm holds of the connection's and the
// server's buffer budgets.
func (s *Session) release(strm *stream) {
	s.setReserved(strm, 0)
	s.lim.Shared.give(strm.charged)
	strm.charged = 0
	if strm.waiting {
		strm.waiting = false
	}
}
