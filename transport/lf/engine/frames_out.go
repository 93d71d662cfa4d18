package engine

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Our encoder has no dynamic table, so a field list always encodes to the
// same bytes once its first block (which carries the table size update)
// went out: the two blocks of every plain answer are made once.
var (
	blockHeaders = staticBlock(hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	blockOK      = staticBlock(hpack.HeaderField{Name: "grpc-status", Value: "0"})
)

func staticBlock(fields ...hpack.HeaderField) []byte {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	e.SetMaxDynamicTableSizeLimit(0)
	_ = e.WriteField(hpack.HeaderField{Name: "x", Value: "y"}) // carries the size update
	b.Reset()
	for _, f := range fields {
		_ = e.WriteField(f)
	}
	return bytes.Clone(b.Bytes())
}

// Finish writes the call's response (headers, DATA as the peer's flow
// control windows allow, trailers) into the output. A call whose stream the
// peer reset is dropped.
func (s *Session) Finish(c *Call) {
	x := s.streams[c.stream]
	if x == nil || x.call != c {
		return
	}
	x.out = false
	c.req = nil
	s.release(x)
	s.answer(x, c.st, c)
}

// Reject answers a call without running it, with code and msg (for a
// Half-Sync/Half-Async queue that is full, say).
func (s *Session) Reject(c *Call, code codes.Code, msg string) {
	x := s.streams[c.stream]
	if x == nil || x.call != c {
		return
	}
	x.out = false
	c.req = nil
	s.release(x)
	s.answer(x, status.New(code, msg), nil)
}

// answer writes the response of stream x: st (nil: OK) and, when c is not
// nil, its headers, message and trailers.
func (s *Session) answer(x *stream, st *status.Status, c *Call) {
	s.grabOut()
	x.answered = true
	var header, trailer metadata.MD
	if c != nil {
		header, trailer = c.header, c.trailer
	}
	ok := st == nil || st.Code() == codes.OK
	fields := s.fields[:0]
	switch {
	case ok && len(header) == 0 && s.hencUsed:
		s.writeBlock(x.id, blockHeaders, false)
	case ok || len(header) > 0:
		fields = append(fields, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		fields = appendMDFields(fields, header)
		s.writeHeaders(x.id, fields, false)
		fields = fields[:0]
	default:
		// Trailers-Only: one block with the status and the error.
		code := "200"
		if x.httpStatus != 0 {
			code = strconv.Itoa(x.httpStatus)
		}
		fields = append(fields, hpack.HeaderField{Name: ":status", Value: code}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	}
	if ok {
		msg := c.resp
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
		if n := 5 + len(msg); n <= s.peerMaxFrame && int64(n) <= s.sendWindow && int64(n) <= x.sendWindow {
			// The common case: the whole message in one DATA frame now.
			s.writeDataHeader(x.id, n)
			s.out = append(s.out, prefix[:]...)
			s.out = append(s.out, msg...)
			s.sendWindow -= int64(n)
			x.sendWindow -= int64(n)
		} else {
			x.pend = make([]byte, n)
			copy(x.pend, prefix[:])
			copy(x.pend[5:], msg)
		}
		if len(trailer) == 0 && s.hencUsed {
			s.fields = fields // keep what the headers grew
			// The static "grpc-status: 0" block (a nil trailer).
			if len(x.pend) == 0 {
				s.finishStream(x, nil)
			} else {
				s.send(x)
			}
			return
		}
		fields = append(fields, hpack.HeaderField{Name: "grpc-status", Value: "0"})
	} else {
		fields = append(fields,
			hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))},
			hpack.HeaderField{Name: "grpc-message", Value: encodeGRPCMessage(st.Message())})
	}
	fields = appendMDFields(fields, trailer)
	s.fields = fields
	if len(x.pend) == 0 {
		s.finishStream(x, fields)
		return
	}
	x.trailer = append([]hpack.HeaderField(nil), fields...)
	s.send(x)
}

func appendMDFields(fields []hpack.HeaderField, md metadata.MD) []hpack.HeaderField {
	for k, vs := range md {
		k = strings.ToLower(k)
		if strings.HasPrefix(k, ":") || reservedHeader(k) {
			continue
		}
		for _, v := range vs {
			fields = append(fields, hpack.HeaderField{Name: k, Value: encodeMetaValue(k, v)})
		}
	}
	return fields
}

// writeHeaders encodes fields and writes HEADERS (+ CONTINUATION) frames
// straight into the output.
func (s *Session) writeHeaders(id uint32, fields []hpack.HeaderField, end bool) {
	s.hbuf.Reset()
	for _, f := range fields {
		_ = s.henc.WriteField(f)
	}
	s.hencUsed = true
	s.writeBlock(id, s.hbuf.Bytes(), end)
	if s.hbuf.Cap() > 4096 {
		s.hbuf = bytes.Buffer{}
	}
}

// writeBlock writes a header block as HEADERS (+ CONTINUATION) frames.
func (s *Session) writeBlock(id uint32, block []byte, end bool) {
	typ := http2.FrameHeaders
	for {
		n := min(len(block), s.peerMaxFrame)
		var flags http2.Flags
		if typ == http2.FrameHeaders && end {
			flags |= http2.FlagHeadersEndStream
		}
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders // the same bit as CONTINUATION's
		}
		var h [frameHeaderLen]byte
		h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
		h[3], h[4] = byte(typ), byte(flags)
		binary.BigEndian.PutUint32(h[5:], id)
		s.out = append(s.out, h[:]...)
		s.out = append(s.out, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			break
		}
		typ = http2.FrameContinuation
	}
}

// send writes as much of x's pending DATA as the windows allow, then its
// trailers, and closes the stream; a stream still short of window waits in
// s.blocked for a WINDOW_UPDATE.
func (s *Session) send(x *stream) {
	for len(x.pend) > 0 {
		n := int64(min(len(x.pend), s.peerMaxFrame))
		n = min(n, s.sendWindow, x.sendWindow)
		if n <= 0 {
			if !s.isBlocked(x.id) {
				s.blocked = append(s.blocked, x.id)
			}
			return
		}
		s.writeDataHeader(x.id, int(n))
		s.out = append(s.out, x.pend[:n]...)
		x.pend = x.pend[n:]
		s.sendWindow -= n
		x.sendWindow -= n
	}
	x.pend = nil
	s.finishStream(x, x.trailer)
}

// finishStream writes the trailers that end stream x and forgets it.
func (s *Session) finishStream(x *stream, trailer []hpack.HeaderField) {
	if trailer == nil {
		s.writeBlock(x.id, blockOK, true)
	} else {
		s.writeHeaders(x.id, trailer, true)
	}
	x.trailer = nil
	if !x.endRecv {
		// We answered before the request ended: tell the client to stop.
		s.rst(x.id, http2.ErrCodeNo)
	}
	delete(s.streams, x.id)
	s.release(x)
	s.retryWaiting()
	if !x.out {
		// Nobody holds its call: reuse it. (A stream that is dropped, or
		// whose call is out on another goroutine, is left to the GC.)
		*x = stream{}
		streams.Put(x)
	}
}

// writeDataHeader writes the header of a DATA frame of n bytes straight
// into the output (the Framer would copy the payload through a buffer of
// its own that then stays allocated).
func (s *Session) writeDataHeader(id uint32, n int) {
	var h [frameHeaderLen]byte
	h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
	h[3] = byte(http2.FrameData)
	binary.BigEndian.PutUint32(h[5:], id)
	s.out = append(s.out, h[:]...)
}

func (s *Session) isBlocked(id uint32) bool {
	for _, b := range s.blocked {
		if b == id {
			return true
		}
	}
	return false
}

// unblock resumes streams waiting for flow-control window.
func (s *Session) unblock() {
	if len(s.blocked) == 0 {
		return
	}
	ids := s.blocked
	s.blocked = nil
	for _, id := range ids {
		if x := s.streams[id]; x != nil {
			s.send(x)
		}
	}
}
