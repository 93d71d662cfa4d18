package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

const (
	clientPreface  = http2.ClientPreface
	frameHeaderLen = 9
	// maxFrameSize is the largest frame we accept (the HTTP/2 default; we
	// never raise SETTINGS_MAX_FRAME_SIZE).
	maxFrameSize = 16384
	// initialPeerWindow is the HTTP/2 initial flow-control window.
	initialPeerWindow = 65535
	// streamWindow and connWindow are the receive windows we grant.
	streamWindow = 1 << 20
	connWindow   = 4 << 20
	maxWindow    = 1<<31 - 1
)

// Session is the protocol state of one HTTP/2 connection.
type Session struct {
	reg  *Registry
	lim  Limits
	peer *peer.Peer // shared by the calls of this connection; nil if unknown

	in     []byte // unparsed input
	out    []byte // output; out[outOff:] is unwritten
	outOff int

	pf   *pooledFramer // borrowed while busy (see pool.go)
	outp *[]byte       // the pooled buffer behind out
	rd   bytes.Reader
	hdec *hpack.Decoder
	henc *hpack.Encoder
	hbuf bytes.Buffer

	prefaceSeen   bool
	settingsSeen  bool
	cancelOnReset bool // see CancelOnReset
	err           error

	streams    map[uint32]*stream
	ready      []*Call
	lastStream uint32 // highest stream id the client opened
	goAwaySent bool
	peerGoAway bool

	peerInitWindow int64
	peerMaxFrame   int
	sendWindow     int64 // connection-level, toward the peer
	recvUnacked    int   // connection-level bytes consumed, not yet returned
	blocked        []uint32
	fields         []hpack.HeaderField // scratch for answers
	hencUsed       bool                // henc sent its table size update

	now    time.Time // when this Feed's bytes arrived, if nowSet
	nowSet bool
}

// received returns when the bytes of the current Feed arrived (read once
// per Feed, when a call first needs it): a grpc-timeout counts from there.
func (s *Session) received() time.Time {
	if !s.nowSet {
		s.now, s.nowSet = time.Now(), true
	}
	return s.now
}

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

type stream struct {
	id          uint32
	call        *Call // &callBuf once the headers named a known method
	callBuf     Call
	body        []byte
	bodyInline  [128]byte // the body of a small request
	recvUnacked int
	endRecv     bool
	answered    bool // the response is being written; more input is dropped
	out         bool // the call is queued for TakeCalls or taken, and not back yet

	sendWindow int64
	pend       []byte // response DATA not yet written
	trailer    []hpack.HeaderField
}

// NewSession returns the Session of a newly accepted connection. Its output
// already holds the server preface (SETTINGS and a connection WINDOW_UPDATE);
// write it at once. remote is the peer's address, for peer.FromContext; it
// may be nil.
func NewSession(reg *Registry, lim Limits, remote net.Addr) *Session {
	if lim.MaxRecvMsgBytes <= 0 {
		lim.MaxRecvMsgBytes = DefaultMaxRecvMsgBytes
	}
	if lim.MaxConcurrentStreams == 0 {
		lim.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if lim.MaxHeaderListBytes == 0 {
		lim.MaxHeaderListBytes = DefaultMaxHeaderListBytes
	}
	s := &Session{
		reg: reg, lim: lim,
		peerInitWindow: initialPeerWindow,
		peerMaxFrame:   maxFrameSize,
		sendWindow:     initialPeerWindow,
	}
	if remote != nil {
		s.peer = &peer.Peer{Addr: remote}
	}
	s.hdec = hpack.NewDecoder(4096, s.emit)
	s.henc = hpack.NewEncoder(&s.hbuf)
	// No dynamic table for what we send: its index maps cost ~1 KB per
	// connection, and our answers are a handful of short fields that
	// encode to a few bytes anyway (static-table names, Huffman values).
	s.henc.SetMaxDynamicTableSizeLimit(0)
	fr := s.framer()
	_ = fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: lim.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: lim.MaxHeaderListBytes},
	)
	_ = fr.WriteWindowUpdate(0, connWindow-initialPeerWindow)
	return s
}

// CancelOnReset makes the client's RST_STREAM cancel the context of a call
// that is running. Only a driver that runs calls off the goroutine holding
// the Session (Half-Sync/Half-Async) can see the reset while the call runs;
// inline drivers leave it off and save the context. Call it before Feed.
func (s *Session) CancelOnReset() { s.cancelOnReset = true }

// framer returns the Framer the Session borrowed, borrowing one after
// Release gave it back. It only ever reads whole frames (and whole header
// blocks) from s.rd.
func (s *Session) framer() *http2.Framer {
	if s.pf == nil {
		s.grabOut()
		pf := framers.Get().(*pooledFramer)
		pf.io.s = s
		pf.fr.MaxHeaderListSize = s.lim.MaxHeaderListBytes
		s.pf = pf
	}
	return s.pf.fr
}

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
	whole, err := s.wholeFrames(buf[used:])
	if err != nil {
		return 0, s.connError(http2.ErrCodeFrameSize, err)
	}
	if whole == 0 {
		return used, nil
	}
	s.rd.Reset(buf[used : used+whole])
	fr := s.framer()
	for s.rd.Len() > 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				// The framer consumed the frame (and a whole header block).
				s.streamReset(se.StreamID, se.Code)
				if se.StreamID > s.lastStream && se.StreamID%2 == 1 {
					s.lastStream = se.StreamID
				}
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
	return used + whole, nil
}

// wholeFrames returns the length of the longest prefix of b made of whole
// frames that does not end inside a header block.
func (s *Session) wholeFrames(b []byte) (int, error) {
	off, safe, inBlock := 0, 0, false
	for len(b)-off >= frameHeaderLen {
		length := int(b[off])<<16 | int(b[off+1])<<8 | int(b[off+2])
		if length > maxFrameSize {
			return 0, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, length, maxFrameSize)
		}
		if len(b)-off-frameHeaderLen < length {
			break
		}
		typ, flags := http2.FrameType(b[off+3]), http2.Flags(b[off+4])
		off += frameHeaderLen + length
		switch typ {
		case http2.FrameHeaders:
			inBlock = flags&http2.FlagHeadersEndHeaders == 0
		case http2.FrameContinuation:
			inBlock = flags&http2.FlagContinuationEndHeaders == 0
		}
		if !inBlock {
			safe = off
		}
	}
	if inBlock && len(b)-safe > int(s.lim.MaxHeaderListBytes)+64<<10 {
		return 0, fmt.Errorf("%w: header block over %d bytes still open", ErrProtocol, len(b)-safe)
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
		if f.IsAck() {
			return nil
		}
		err := f.ForeachSetting(func(st http2.Setting) error {
			if err := st.Valid(); err != nil {
				return err
			}
			switch st.ID {
			case http2.SettingInitialWindowSize:
				delta := int64(st.Val) - s.peerInitWindow
				s.peerInitWindow = int64(st.Val)
				for _, x := range s.streams {
					x.sendWindow += delta
				}
			case http2.SettingMaxFrameSize:
				s.peerMaxFrame = int(st.Val)
			case http2.SettingHeaderTableSize:
				s.henc.SetMaxDynamicTableSizeLimit(st.Val)
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
	case *http2.PingFrame:
		if !f.IsAck() {
			_ = s.framer().WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			s.sendWindow += int64(f.Increment)
			if s.sendWindow > maxWindow {
				return s.connError(http2.ErrCodeFlowControl, fmt.Errorf("%w: connection window overflow", ErrProtocol))
			}
		} else if x := s.streams[f.StreamID]; x != nil {
			x.sendWindow += int64(f.Increment)
			if x.sendWindow > maxWindow {
				s.streamReset(x.id, http2.ErrCodeFlowControl)
				return nil
			}
		}
		s.unblock()
	case *http2.HeadersFrame:
		return s.onHeaderFragment(f.StreamID, f.HeaderBlockFragment(), true, f.StreamEnded(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		return s.onHeaderFragment(f.StreamID, f.HeaderBlockFragment(), false, false, f.HeadersEnded())
	case *http2.DataFrame:
		return s.onData(f)
	case *http2.RSTStreamFrame:
		s.drop(f.StreamID)
	case *http2.GoAwayFrame:
		s.peerGoAway = true
	case *http2.PushPromiseFrame:
		return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: PUSH_PROMISE from a client", ErrProtocol))
	}
	// PRIORITY and unknown frame types are ignored, as HTTP/2 allows.
	return nil
}

func (s *Session) onHeaders(f *headerBlock) error {
	id := f.id
	if id%2 == 0 || id <= s.lastStream {
		if s.streams[id] != nil {
			// Trailers from a client on an open stream: unary calls
			// have none; treat as the end of the request.
			return s.endOfRequest(s.streams[id], f.endStream)
		}
		return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: HEADERS on stream %d (last %d)", ErrProtocol, id, s.lastStream))
	}
	s.lastStream = id
	if s.goAwaySent {
		s.rst(id, http2.ErrCodeRefusedStream)
		return nil
	}
	if uint32(len(s.streams)) >= s.lim.MaxConcurrentStreams {
		s.rst(id, http2.ErrCodeRefusedStream)
		return nil
	}
	x := streams.Get().(*stream)
	x.id, x.sendWindow, x.endRecv = id, s.peerInitWindow, f.endStream
	if s.streams == nil {
		s.streams = make(map[uint32]*stream)
	}
	s.streams[id] = x
	if f.truncated {
		s.answer(x, status.Newf(codes.ResourceExhausted, "engine: header list larger than the limit of %d bytes", s.lim.MaxHeaderListBytes), nil)
		return nil
	}
	if f.method != "POST" {
		s.drop(id)
		s.rst(id, http2.ErrCodeProtocol)
		return nil
	}
	c := &x.callBuf
	c.stream, c.method, c.peer, c.cancelable = id, f.path, s.peer, s.cancelOnReset
	c.ctx = newCallCtx(c)
	contentType := ""
	for _, hf := range f.fields {
		switch {
		case hf.Name == "content-type":
			contentType = hf.Value
		case hf.Name == "grpc-timeout":
			d, err := parseTimeout(hf.Value)
			if err != nil {
				s.answer(x, status.New(codes.Internal, "engine: "+err.Error()), nil)
				return nil
			}
			c.timeout = d
			c.received = s.received()
		case hf.Name == "grpc-encoding":
			if hf.Value != "identity" {
				s.answer(x, status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", hf.Value), nil)
				return nil
			}
		case hf.Name == ":authority":
			c.ctx.addMetadata(hf.Name, hf.Value)
		case strings.HasPrefix(hf.Name, ":") || reservedHeader(hf.Name):
		default:
			v, err := decodeMetaValue(hf.Name, hf.Value)
			if err != nil {
				s.answer(x, status.Newf(codes.Internal, "engine: malformed binary metadata %q: %v", hf.Name, err), nil)
				return nil
			}
			c.ctx.addMetadata(hf.Name, v)
		}
	}
	if contentType != "application/grpc" && !strings.HasPrefix(contentType, "application/grpc+") && !strings.HasPrefix(contentType, "application/grpc;") {
		s.answer(x, status.Newf(codes.Internal, "engine: invalid gRPC request content-type %q", contentType), nil)
		return nil
	}
	entry, ok := s.reg.methods[c.method]
	if !ok {
		s.answer(x, unknownMethod(s.reg, c.method), nil)
		return nil
	}
	c.entry = entry
	x.call = c
	if x.endRecv {
		return s.endOfRequest(x, true)
	}
	return nil
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
	n := int(f.Header().Length)
	s.recvUnacked += n
	x := s.streams[f.StreamID]
	if x == nil {
		if f.StreamID > s.lastStream || f.StreamID%2 == 0 {
			return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: DATA on idle stream %d", ErrProtocol, f.StreamID))
		}
		return nil // a stream we already closed or reset
	}
	if x.endRecv {
		s.streamReset(x.id, http2.ErrCodeStreamClosed)
		return nil
	}
	x.recvUnacked += n
	if x.answered {
		if f.StreamEnded() {
			x.endRecv = true
		}
		return nil
	}
	data := f.Data()
	if len(x.body)+len(data) > 5+s.lim.MaxRecvMsgBytes {
		s.tooLarge(x, len(x.body)+len(data)-5)
		return nil
	}
	if x.body == nil {
		x.body = x.bodyInline[:0]
	}
	x.body = append(x.body, data...)
	if len(x.body) >= 5 {
		if size := int(binary.BigEndian.Uint32(x.body[1:5])); size > s.lim.MaxRecvMsgBytes {
			s.tooLarge(x, size)
			return nil
		}
	}
	if !f.StreamEnded() && x.recvUnacked >= streamWindow/4 {
		_ = s.framer().WriteWindowUpdate(x.id, uint32(x.recvUnacked))
		x.recvUnacked = 0
	}
	return s.endOfRequest(x, f.StreamEnded())
}

func (s *Session) tooLarge(x *stream, size int) {
	x.body = nil
	s.answer(x, status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, s.lim.MaxRecvMsgBytes), nil)
}

// endOfRequest queues the stream's call once the client half-closed.
func (s *Session) endOfRequest(x *stream, ended bool) error {
	if !ended || x.answered {
		if ended {
			x.endRecv = true
		}
		return nil
	}
	x.endRecv = true
	b := x.body
	x.body = nil
	switch {
	case len(b) < 5:
		s.answer(x, status.Newf(codes.Internal, "engine: request for %s ended without a complete message (%d bytes)", x.call.method, len(b)), nil)
	case b[0] == 1:
		s.answer(x, status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding"), nil)
	case b[0] != 0:
		s.answer(x, status.Newf(codes.Internal, "engine: bad message flag %d", b[0]), nil)
	case int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5:
		s.answer(x, status.Newf(codes.Internal, "engine: unary request for %s holds %d bytes after a %d-byte message", x.call.method, len(b)-5, binary.BigEndian.Uint32(b[1:5])), nil)
	default:
		x.call.req = b[5:]
		x.answered = true
		x.out = true
		s.ready = append(s.ready, x.call)
	}
	return nil
}

// returnConnWindow sends a connection WINDOW_UPDATE once a quarter of the
// window was consumed (or at once when force).
func (s *Session) returnConnWindow(force bool) {
	if s.recvUnacked > 0 && (force || s.recvUnacked >= connWindow/4) {
		_ = s.framer().WriteWindowUpdate(0, uint32(s.recvUnacked))
		s.recvUnacked = 0
	}
}

// TakeCalls appends the calls ready to run to dst and removes them from the
// Session. Calls whose stream the client has reset meanwhile are skipped.
func (s *Session) TakeCalls(dst []*Call) []*Call {
	for _, c := range s.ready {
		if s.streams[c.stream] != nil {
			dst = append(dst, c)
		}
	}
	clear(s.ready)
	s.ready = s.ready[:0]
	return dst
}

// Serve is TakeCalls + Run + Finish for every ready call, inline. It
// returns how many calls ran.
func (s *Session) Serve(base context.Context) int {
	n := 0
	var buf [16]*Call
	for len(s.ready) > 0 {
		for _, c := range s.TakeCalls(buf[:0]) {
			c.Run(base)
			s.Finish(c)
			n++
		}
	}
	return n
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
		fields = append(fields, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
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
		_ = s.framer().WriteRSTStream(x.id, http2.ErrCodeNo)
	}
	delete(s.streams, x.id)
	if !x.out {
		// Nobody holds its call: reuse it. (A stream that is dropped, or
		// whose call is out on another goroutine, is left to the GC.)
		*x = stream{}
		streams.Put(x)
	}
}

// streams are reused across calls and connections: a stream (with its
// Call and their inline buffers) was most of the bytes the engine
// allocated per call, and the garbage collector's work with them a tenth
// of the pool's CPU.
var streams = sync.Pool{New: func() any { return new(stream) }}

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

// streamReset answers a stream-level error: RST_STREAM and forget it.
func (s *Session) streamReset(id uint32, code http2.ErrCode) {
	s.drop(id)
	s.rst(id, code)
}

func (s *Session) rst(id uint32, code http2.ErrCode) {
	_ = s.framer().WriteRSTStream(id, code)
}

// drop forgets stream id (the client reset it, or it failed); a call of it
// that is running is cancelled where CancelOnReset allows.
func (s *Session) drop(id uint32) {
	if x := s.streams[id]; x != nil && x.call != nil && x.call.cancelable {
		x.call.abort()
	}
	delete(s.streams, id)
}

// Output returns the bytes waiting to be written to the connection.
func (s *Session) Output() []byte { return s.out[s.outOff:] }

// Wrote tells the Session that the first n bytes of Output were written.
func (s *Session) Wrote(n int) {
	s.outOff += n
	if s.outOff >= len(s.out) {
		s.out = s.out[:0]
		s.outOff = 0
	}
}

// GoAway starts a graceful close: it queues GOAWAY(NO_ERROR) naming the last
// stream accepted; later streams are refused. Calls already accepted finish.
func (s *Session) GoAway() {
	if s.goAwaySent || s.err != nil {
		return
	}
	s.goAwaySent = true
	_ = s.framer().WriteGoAway(s.lastStream, http2.ErrCodeNo, nil)
}

// Done reports that the connection can be closed once Output is flushed:
// a GOAWAY was sent or received and no stream is open, or Feed failed.
func (s *Session) Done() bool {
	if s.err != nil {
		return true
	}
	return (s.goAwaySent || s.peerGoAway) && len(s.streams) == 0 && len(s.ready) == 0
}

// Open returns how many streams are open (accepted and not yet answered).
func (s *Session) Open() int { return len(s.streams) }

// Release drops buffers the Session holds while idle, to keep an idle
// connection small. Call it when Output is empty and the driver is about to
// wait for more input.
func (s *Session) Release() {
	if len(s.in) == 0 {
		s.in = nil
	}
	if len(s.in) == 0 && s.pf != nil {
		// The HPACK state lives in hdec/henc, not in the Framer.
		s.pf.io.s = nil
		framers.Put(s.pf)
		s.pf = nil
		s.rd.Reset(nil)
	}
	if len(s.Output()) == 0 {
		s.releaseOut()
	}
	if len(s.streams) == 0 {
		if s.hbuf.Cap() > 0 {
			s.hbuf = bytes.Buffer{}
		}
		s.fields = nil
	}
}
