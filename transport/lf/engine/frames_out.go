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
	if strm := s.takeBack(c); strm != nil {
		s.answer(strm, c.st, c)
	}
}

// Reject answers a call without running it, with code and msg (for a
// Half-Sync/Half-Async queue that is full, say).
func (s *Session) Reject(c *Call, code codes.Code, msg string) {
	if strm := s.takeBack(c); strm != nil {
		s.answer(strm, status.New(code, msg), nil)
	}
}

// takeBack returns the stream of call c, back from the driver, with its
// request buffers given back; nil if the peer reset the stream meanwhile.
func (s *Session) takeBack(c *Call) *stream {
	strm := s.streams[c.stream]
	if strm == nil || strm.call != c {
		return nil
	}
	strm.out = false
	c.req = nil
	s.release(strm)
	return strm
}

// answer writes the response of strm: st (nil: OK) and, when c is not
// nil, its headers, message and trailers.
func (s *Session) answer(strm *stream, st *status.Status, c *Call) {
	s.grabOut()
	strm.answered = true
	var header, trailer metadata.MD
	if c != nil {
		header, trailer = c.header, c.trailer
	}
	ok := st == nil || st.Code() == codes.OK
	fields := s.fields[:0]
	switch {
	case ok && len(header) == 0 && s.sizeUpdateSent:
		s.writeBlock(strm.id, blockHeaders, false)
	case ok || len(header) > 0:
		fields = append(fields, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		fields = appendMDFields(fields, header)
		s.writeHeaders(strm.id, fields, false)
		fields = fields[:0]
	default:
		// Trailers-Only: one block with the status and the error.
		code := "200"
		if strm.httpStatus != 0 {
			code = strconv.Itoa(strm.httpStatus)
		}
		fields = append(fields, hpack.HeaderField{Name: ":status", Value: code}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	}
	if ok {
		msg := c.resp
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
		if n := 5 + len(msg); n <= s.peerMaxFrame && int64(n) <= s.sendWindow && int64(n) <= strm.sendWindow {
			// The common case: the whole message in one DATA frame now.
			s.writeDataHeader(strm.id, n)
			s.out = append(s.out, prefix[:]...)
			s.out = append(s.out, msg...)
			s.sendWindow -= int64(n)
			strm.sendWindow -= int64(n)
		} else {
			strm.pending = make([]byte, n)
			copy(strm.pending, prefix[:])
			copy(strm.pending[5:], msg)
		}
		if len(trailer) == 0 && s.sizeUpdateSent {
			s.fields = fields // keep what the headers grew
			// The static "grpc-status: 0" block (a nil trailer).
			if len(strm.pending) == 0 {
				s.finishStream(strm, nil)
			} else {
				s.send(strm)
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
	if len(strm.pending) == 0 {
		s.finishStream(strm, fields)
		return
	}
	strm.trailer = append([]hpack.HeaderField(nil), fields...)
	s.send(strm)
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
	s.headerBuf.Reset()
	for _, f := range fields {
		_ = s.headerEnc.WriteField(f)
	}
	s.sizeUpdateSent = true
	s.writeBlock(id, s.headerBuf.Bytes(), end)
	if s.headerBuf.Cap() > 4096 {
		s.headerBuf = bytes.Buffer{}
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
		var hdr [frameHeaderLen]byte
		hdr[0], hdr[1], hdr[2] = byte(n>>16), byte(n>>8), byte(n)
		hdr[3], hdr[4] = byte(typ), byte(flags)
		binary.BigEndian.PutUint32(hdr[5:], id)
		s.out = append(s.out, hdr[:]...)
		s.out = append(s.out, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			break
		}
		typ = http2.FrameContinuation
	}
}

// send writes as much of strm's pending DATA as the windows allow, then its
// trailers, and closes the stream; a stream still short of window waits in
// s.blocked for a WINDOW_UPDATE.
func (s *Session) send(strm *stream) {
	for len(strm.pending) > 0 {
		n := int64(min(len(strm.pending), s.peerMaxFrame))
		n = min(n, s.sendWindow, strm.sendWindow)
		if n <= 0 {
			if !s.isBlocked(strm.id) {
				s.blocked = append(s.blocked, strm.id)
			}
			return
		}
		s.writeDataHeader(strm.id, int(n))
		s.out = append(s.out, strm.pending[:n]...)
		strm.pending = strm.pending[n:]
		s.sendWindow -= n
		strm.sendWindow -= n
	}
	strm.pending = nil
	s.finishStream(strm, strm.trailer)
}

// finishStream writes the trailers that end strm and forgets it.
func (s *Session) finishStream(strm *stream, trailer []hpack.HeaderField) {
	if trailer == nil {
		s.writeBlock(strm.id, blockOK, true)
	} else {
		s.writeHeaders(strm.id, trailer, true)
	}
	strm.trailer = nil
	if !strm.endRecv {
		// We answered before the request ended: tell the client to stop.
		s.sendReset(strm.id, http2.ErrCodeNo)
	}
	delete(s.streams, strm.id)
	s.release(strm)
	s.retryWaiting()
	if !strm.out {
		// Nobody holds its call: reuse it. (A stream that is dropped, or
		// whose call is out on another goroutine, is left to the GC.)
		*strm = stream{}
		streams.Put(strm)
	}
}

// writeDataHeader writes the header of a DATA frame of n bytes straight
// into the output (the Framer would copy the payload through a buffer of
// its own that then stays allocated).
func (s *Session) writeDataHeader(id uint32, n int) {
	var hdr [frameHeaderLen]byte
	hdr[0], hdr[1], hdr[2] = byte(n>>16), byte(n>>8), byte(n)
	hdr[3] = byte(http2.FrameData)
	binary.BigEndian.PutUint32(hdr[5:], id)
	s.out = append(s.out, hdr[:]...)
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
		if strm := s.streams[id]; strm != nil {
			s.send(strm)
		}
	}
}
