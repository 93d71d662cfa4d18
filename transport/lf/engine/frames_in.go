package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/internal/msglimit"
)

// Feed hands the Session bytes read from the connection. It parses every
// complete frame, answers control frames (SETTINGS ACK, PING ACK,
// WINDOW_UPDATE) into the output, answers failed calls (unknown method,
// oversize message, bad headers) at once, and queues each complete call for
// TakeCalls. An incomplete frame is kept until the next Feed. Feed returns a
// non-nil error when the connection must be closed once the output is
// flushed.
func (s *Session) Feed(p []byte) error {
	if s.err != nil {
		return s.err
	}
	s.nowSet = false
	s.grabOut()
	buf := p
	if len(s.in) > 0 {
		s.in = append(s.in, p...)
		buf = s.in
	}
	used, err := s.parse(buf)
	if err != nil {
		s.err = err
		s.in = nil
		return err
	}
	rest := buf[used:]
	switch {
	case len(rest) == 0:
		s.in = s.in[:0]
	case len(s.in) > 0:
		s.in = append(s.in[:0], rest...)
	default:
		s.in = append([]byte(nil), rest...)
	}
	s.returnConnWindow(false)
	return nil
}

// parse consumes the preface and every complete frame in buf and returns
// how many bytes it used.
func (s *Session) parse(buf []byte) (int, error) {
	used := 0
	if !s.prefaceSeen {
		n := min(len(buf), len(clientPreface))
		if string(buf[:n]) != clientPreface[:n] {
			return 0, ErrBadPreface
		}
		if n < len(clientPreface) {
			return 0, nil
		}
		s.prefaceSeen = true
		used = n
	}
	// A frame that breaks the framing (too large, or out of place in a
	// header block) ends the connection, after the frames before it.
	whole, ferr := s.wholeFrames(buf[used:])
	if whole > 0 {
		s.frameReader.Reset(buf[used : used+whole])
		fr := s.framer()
		for s.frameReader.Len() > 0 {
			if s.skipFrame(buf[used+whole-s.frameReader.Len():]) {
				continue
			}
			f, err := fr.ReadFrame()
			if err != nil {
				var se http2.StreamError
				if errors.As(err, &se) {
					// The framer consumed the frame (a WINDOW_UPDATE of 0).
					if s.idle(se.StreamID) {
						return 0, s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: %v on idle stream %d", ErrProtocol, err, se.StreamID))
					}
					s.streamReset(se.StreamID, se.Code)
					continue
				}
				var ce http2.ConnectionError
				if errors.As(err, &ce) {
					return 0, s.connError(http2.ErrCode(ce), fmt.Errorf("%w: %v", ErrProtocol, err))
				}
				return 0, s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: %v", ErrProtocol, err))
			}
			if err := s.handle(f); err != nil {
				return 0, err
			}
		}
	}
	if ferr != nil {
		code := http2.ErrCodeProtocol
		if errors.Is(ferr, errFrameSize) {
			code = http2.ErrCodeFrameSize
		}
		return 0, s.connError(code, ferr)
	}
	return used + whole, nil
}

// skipFrame handles, before the Framer sees it, a frame whose error x/net
// would make a connection error where RFC 9113 asks for a stream error: a
// PRIORITY frame of the wrong length (§6.3: FRAME_SIZE_ERROR on the
// stream). It reports whether it consumed the frame at the start of b.
func (s *Session) skipFrame(b []byte) bool {
	length := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
	id := binary.BigEndian.Uint32(b[5:9]) & (1<<31 - 1)
	if http2.FrameType(b[3]) != http2.FramePriority || length == 5 || id == 0 {
		return false
	}
	_, _ = s.frameReader.Seek(int64(frameHeaderLen+length), io.SeekCurrent)
	s.streamReset(id, http2.ErrCodeFrameSize)
	return true
}

var errFrameSize = errors.New("frame too large")

// wholeFrames returns the length of the longest prefix of b made of whole
// frames that does not end inside a header block. Its error says the frame
// after that prefix breaks the framing: it is larger than we allow, or it
// is not the CONTINUATION its header block needs, or a CONTINUATION
// outside one (RFC 9113 §6.2, §6.10: PROTOCOL_ERROR).
func (s *Session) wholeFrames(b []byte) (int, error) {
	off, safe, inBlock := 0, 0, false
	var blockID uint32
	for len(b)-off >= frameHeaderLen {
		length := int(b[off])<<16 | int(b[off+1])<<8 | int(b[off+2])
		typ, flags := http2.FrameType(b[off+3]), http2.Flags(b[off+4])
		id := binary.BigEndian.Uint32(b[off+5:]) & (1<<31 - 1)
		if length > maxFrameSize {
			return safe, fmt.Errorf("%w: %w: %v frame of %d bytes exceeds %d", ErrProtocol, errFrameSize, typ, length, maxFrameSize)
		}
		switch {
		case inBlock && (typ != http2.FrameContinuation || id != blockID):
			return safe, fmt.Errorf("%w: %v frame on stream %d inside the header block of stream %d", ErrProtocol, typ, id, blockID)
		case !inBlock && typ == http2.FrameContinuation:
			return safe, fmt.Errorf("%w: CONTINUATION on stream %d outside a header block", ErrProtocol, id)
		}
		if len(b)-off-frameHeaderLen < length {
			break
		}
		off += frameHeaderLen + length
		switch typ {
		case http2.FrameHeaders:
			inBlock, blockID = flags&http2.FlagHeadersEndHeaders == 0, id
		case http2.FrameContinuation:
			inBlock = flags&http2.FlagContinuationEndHeaders == 0
		}
		if !inBlock {
			safe = off
		}
	}
	if inBlock && len(b)-safe > int(s.lim.MaxHeaderListBytes)+64<<10 {
		return safe, fmt.Errorf("%w: header block over %d bytes still open", ErrProtocol, len(b)-safe)
	}
	return safe, nil
}

// connError queues GOAWAY(code) and returns err for Feed.
func (s *Session) connError(code http2.ErrCode, err error) error {
	_ = s.framer().WriteGoAway(s.lastStream, code, []byte(err.Error()))
	s.goAwaySent = true
	return err
}

func (s *Session) handle(f http2.Frame) error {
	if !s.settingsSeen {
		// RFC 9113 §3.4: the client preface ends with a SETTINGS frame.
		if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
			return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: first frame after the preface is %v, not SETTINGS", ErrProtocol, f.Header().Type))
		}
		s.settingsSeen = true
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return s.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			_ = s.framer().WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		return s.onWindowUpdate(f)
	case *http2.HeadersFrame:
		selfDep := f.HasPriority() && f.Priority.StreamDep == f.StreamID
		return s.onHeaderFragment(f.StreamID, f.HeaderBlockFragment(), true, f.StreamEnded(), f.HeadersEnded(), selfDep)
	case *http2.ContinuationFrame:
		return s.onHeaderFragment(f.StreamID, f.HeaderBlockFragment(), false, false, f.HeadersEnded(), false)
	case *http2.DataFrame:
		return s.onData(f)
	case *http2.RSTStreamFrame:
		if s.idle(f.StreamID) {
			return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: RST_STREAM on idle stream %d", ErrProtocol, f.StreamID))
		}
		s.drop(f.StreamID) // a closed stream: nothing to do
	case *http2.PriorityFrame:
		// Priorities are not acted on, in any stream state (§5.3.2), but a
		// stream cannot depend on itself (RFC 7540 §5.3.1).
		if f.StreamDep == f.StreamID {
			s.streamReset(f.StreamID, http2.ErrCodeProtocol)
		}
	case *http2.GoAwayFrame:
		s.peerGoAway = true
	case *http2.PushPromiseFrame:
		return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: PUSH_PROMISE from a client", ErrProtocol))
	}
	// Unknown frame types are ignored, as HTTP/2 asks (§4.1, §5.5).
	return nil
}

func (s *Session) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		if !s.settingsAcked {
			s.settingsAcked = true
			// The client now counts our initial window, not 65,535, on
			// the streams it opened before.
			if d := int64(s.lim.StreamWindow) - initialPeerWindow; d < 0 {
				for _, strm := range s.streams {
					strm.recvWindow += d
				}
			}
		}
		return nil
	}
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingInitialWindowSize:
			// §6.9.2: the change applies to every open stream; a window
			// may go negative, none may exceed 2^31-1.
			delta := int64(st.Val) - s.peerInitWindow
			s.peerInitWindow = int64(st.Val)
			for _, strm := range s.streams {
				strm.sendWindow += delta
				if strm.sendWindow > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		case http2.SettingMaxFrameSize:
			s.peerMaxFrame = int(st.Val)
		case http2.SettingHeaderTableSize:
			s.headerEnc.SetMaxDynamicTableSizeLimit(st.Val)
		}
		return nil
	})
	if err != nil {
		var ce http2.ConnectionError
		code := http2.ErrCodeProtocol
		if errors.As(err, &ce) {
			code = http2.ErrCode(ce)
		}
		return s.connError(code, fmt.Errorf("%w: bad SETTINGS: %v", ErrProtocol, err))
	}
	_ = s.framer().WriteSettingsAck()
	s.unblock()
	return nil
}

func (s *Session) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		s.sendWindow += int64(f.Increment)
		if s.sendWindow > maxWindow {
			return s.connError(http2.ErrCodeFlowControl, fmt.Errorf("%w: connection window overflow", ErrProtocol))
		}
	} else if strm := s.streams[f.StreamID]; strm != nil {
		strm.sendWindow += int64(f.Increment)
		if strm.sendWindow > maxWindow {
			s.streamReset(strm.id, http2.ErrCodeFlowControl)
			return nil
		}
	} else if s.idle(f.StreamID) {
		return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: WINDOW_UPDATE on idle stream %d", ErrProtocol, f.StreamID))
	}
	// (On a closed stream it is ignored: it may have crossed our END_STREAM.)
	s.unblock()
	return nil
}

func (s *Session) onHeaders(f *headerBlock) error {
	id := f.id
	if strm := s.streams[id]; strm != nil {
		return s.onTrailers(strm, f)
	}
	if id%2 == 0 {
		return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: HEADERS on even stream %d", ErrProtocol, id))
	}
	if id <= s.lastStream {
		switch {
		case s.resetByUs(id):
			return nil // sent before our RST_STREAM reached the client
		case s.skipped(id):
			return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: HEADERS on stream %d after stream %d", ErrProtocol, id, s.lastStream))
		}
		return s.connError(http2.ErrCodeStreamClosed, fmt.Errorf("%w: HEADERS on closed stream %d", ErrProtocol, id))
	}
	s.openID(id)
	if f.selfDep || f.invalid != nil {
		s.streamReset(id, http2.ErrCodeProtocol)
		return nil
	}
	if s.goAwaySent || uint32(len(s.streams)) >= s.lim.MaxConcurrentStreams {
		s.streamReset(id, http2.ErrCodeRefusedStream)
		return nil
	}
	if f.truncated {
		strm := s.newStream(id, f.endStream)
		s.answer(strm, status.Newf(codes.ResourceExhausted, "engine: header list larger than the limit of %d bytes", s.lim.MaxHeaderListBytes), nil)
		return nil
	}
	req, err := checkRequest(f.fields)
	if err != nil {
		// §8.1.1: a malformed request is a stream error.
		s.streamReset(id, http2.ErrCodeProtocol)
		return nil
	}
	strm := s.newStream(id, f.endStream)
	strm.contentLen = req.contentLen
	if req.early != nil {
		// Not a gRPC call: answered, as grpc-go does, with an HTTP status
		// once the request ended.
		strm.early, strm.httpStatus = req.early, req.httpStatus
		if strm.endRecv {
			return s.endOfRequest(strm, true)
		}
		return nil
	}
	c := &strm.callBuf
	c.stream, c.method, c.peer, c.cancelable = id, f.path, s.peer, s.cancelOnReset
	c.ctx = newCallCtx(c)
	for _, hf := range f.fields {
		switch {
		case hf.Name == "grpc-timeout":
			d, _ := parseTimeout(hf.Value) // checked by checkRequest
			c.timeout = d
			c.received = s.received()
		case hf.Name == "grpc-encoding":
			if hf.Value != "identity" {
				s.answer(strm, status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", hf.Value), nil)
				return nil
			}
		case hf.Name == ":authority":
			c.ctx.addMetadata(hf.Name, hf.Value)
		case strings.HasPrefix(hf.Name, ":") || reservedHeader(hf.Name):
		default:
			v, _ := decodeMetaValue(hf.Name, hf.Value) // checked by checkRequest
			c.ctx.addMetadata(hf.Name, v)
		}
	}
	entry, ok := s.reg.methods[c.method]
	if !ok {
		s.answer(strm, unknownMethod(s.reg, c.method), nil)
		return nil
	}
	c.entry = entry
	strm.call = c
	if strm.endRecv {
		return s.endOfRequest(strm, true)
	}
	return nil
}

// onTrailers takes a second header block on an open stream: trailers,
// which must end the stream and carry no pseudo fields (§8.1).
func (s *Session) onTrailers(strm *stream, f *headerBlock) error {
	if strm.endRecv {
		// §5.1: half-closed (remote).
		s.streamReset(strm.id, http2.ErrCodeStreamClosed)
		return nil
	}
	if !f.endStream || f.selfDep || f.invalid != nil || f.truncated || hasPseudo(f.fields) {
		s.streamReset(strm.id, http2.ErrCodeProtocol)
		return nil
	}
	return s.endOfRequest(strm, true)
}

func hasPseudo(fields []hpack.HeaderField) bool {
	return len(fields) > 0 && fields[0].IsPseudo()
}

func unknownMethod(reg *Registry, path string) *status.Status {
	p := strings.TrimPrefix(path, "/")
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return status.Newf(codes.Unimplemented, "malformed method name: %q", path)
	}
	svc, m := p[:i], p[i+1:]
	if !reg.services[svc] {
		return status.Newf(codes.Unimplemented, "unknown service %v", svc)
	}
	return status.Newf(codes.Unimplemented, "unknown method %v for service %v", m, svc)
}

func (s *Session) onData(f *http2.DataFrame) error {
	n := int64(f.Header().Length) // padding included: it counts in flow control
	// §6.9.1: the client may not send more than the windows we granted.
	if n > s.recvWindow {
		return s.connError(http2.ErrCodeFlowControl, fmt.Errorf("%w: %d bytes of DATA with %d left of the connection window", ErrProtocol, n, s.recvWindow))
	}
	s.recvWindow -= n
	s.recvUnacked += int(n) // returned at once: what we keep, stream windows bound
	strm := s.streams[f.StreamID]
	if strm == nil {
		if s.idle(f.StreamID) {
			return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: DATA on idle stream %d", ErrProtocol, f.StreamID))
		}
		if !s.resetByUs(f.StreamID) {
			// §6.1: a closed stream (not one we reset, whose DATA may
			// have crossed our RST_STREAM).
			s.streamReset(f.StreamID, http2.ErrCodeStreamClosed)
		}
		return nil
	}
	if strm.endRecv {
		// §5.1: half-closed (remote).
		s.streamReset(strm.id, http2.ErrCodeStreamClosed)
		return nil
	}
	if n > strm.recvWindow {
		s.streamReset(strm.id, http2.ErrCodeFlowControl)
		return nil
	}
	strm.recvWindow -= n
	data := f.Data()
	strm.dataLen += int64(len(data))
	if strm.contentLen >= 0 && (strm.dataLen > strm.contentLen || (f.StreamEnded() && strm.dataLen != strm.contentLen)) {
		// §8.1.1: DATA that differs from content-length is malformed.
		s.streamReset(strm.id, http2.ErrCodeProtocol)
		return nil
	}
	if strm.answered || strm.early != nil {
		// Dropped: give the stream its credit back so the request can end.
		s.setReserved(strm, int64(len(strm.body))+strm.recvWindow)
		strm.recvUnacked += int(n)
		if !f.StreamEnded() && strm.recvUnacked >= int(s.lim.StreamWindow)/2 {
			_ = s.framer().WriteWindowUpdate(strm.id, uint32(strm.recvUnacked))
			strm.recvWindow += int64(strm.recvUnacked)
			s.setReserved(strm, int64(len(strm.body))+strm.recvWindow)
			strm.recvUnacked = 0
		}
		return s.endOfRequest(strm, f.StreamEnded())
	}
	if len(strm.body)+len(data) > 5+s.lim.MaxRecvMsgBytes {
		s.tooLarge(strm, len(strm.body)+len(data)-5)
		return nil
	}
	// Padding is not kept: the stream's share shrinks by it.
	s.setReserved(strm, int64(len(strm.body)+len(data))+strm.recvWindow)
	if !s.grow(strm, len(data)) {
		strm.body = nil
		s.answer(strm, status.New(codes.ResourceExhausted, "engine: the server's request buffers are full"), nil)
		return nil
	}
	strm.body = append(strm.body, data...)
	if len(strm.body) >= 5 {
		size := int(binary.BigEndian.Uint32(strm.body[1:5]))
		if size > s.lim.MaxRecvMsgBytes {
			s.tooLarge(strm, size)
			return nil
		}
		if len(strm.body) > 5+size {
			s.answer(strm, status.Newf(codes.Internal, "engine: unary request for %s holds %d bytes after a %d-byte message", strm.call.method, len(strm.body)-5, size), nil)
			return nil
		}
		if !f.StreamEnded() && !strm.waiting {
			s.widen(strm, size)
		}
	}
	return s.endOfRequest(strm, f.StreamEnded())
}

// tooLarge ends a call whose request is over MaxRecvMsgBytes. The text names
// the key that sets the limit (msglimit.Refused), so the caller learns what
// to change.
func (s *Session) tooLarge(strm *stream, size int) {
	strm.body = nil
	s.answer(strm, msglimit.Refused(size, s.lim.MaxRecvMsgBytes), nil)
}

// endOfRequest queues the stream's call once the client half-closed.
func (s *Session) endOfRequest(strm *stream, ended bool) error {
	if !ended || strm.answered {
		if ended {
			strm.endRecv = true
			s.setReserved(strm, int64(len(strm.body)))
		}
		return nil
	}
	strm.endRecv = true
	if strm.contentLen >= 0 && strm.dataLen != strm.contentLen {
		s.streamReset(strm.id, http2.ErrCodeProtocol)
		return nil
	}
	if strm.early != nil {
		s.answer(strm, strm.early, nil)
		return nil
	}
	b := strm.body
	strm.body = nil
	s.setReserved(strm, int64(len(b)))
	switch {
	case len(b) < 5:
		s.answer(strm, status.Newf(codes.Internal, "engine: request for %s ended without a complete message (%d bytes)", strm.call.method, len(b)), nil)
	case b[0] == 1:
		s.answer(strm, status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding"), nil)
	case b[0] != 0:
		s.answer(strm, status.Newf(codes.Internal, "engine: bad message flag %d", b[0]), nil)
	case int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5:
		s.answer(strm, status.Newf(codes.Internal, "engine: unary request for %s holds %d bytes after a %d-byte message", strm.call.method, len(b)-5, binary.BigEndian.Uint32(b[1:5])), nil)
	default:
		strm.call.req = b[5:]
		strm.answered = true
		strm.out = true
		s.ready = append(s.ready, strm.call)
	}
	return nil
}

// returnConnWindow sends a connection WINDOW_UPDATE once a quarter of the
// window was consumed (or at once when force).
func (s *Session) returnConnWindow(force bool) {
	if s.recvUnacked > 0 && (force || s.recvUnacked >= int(s.lim.ConnWindow)/4) {
		_ = s.framer().WriteWindowUpdate(0, uint32(s.recvUnacked))
		s.recvWindow += int64(s.recvUnacked)
		s.recvUnacked = 0
	}
}
