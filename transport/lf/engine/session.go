package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
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
	maxWindow         = 1<<31 - 1
	// resetMemory is how many streams the Session remembers having reset
	// itself: frames the client sent on them before it saw the reset are
	// ignored (RFC 9113 §5.1), not answered with STREAM_CLOSED.
	resetMemory = 32
	// skipMemory is how many ranges of stream ids the client skipped (closed
	// without ever being opened) the Session remembers: a HEADERS on one of
	// them is a PROTOCOL_ERROR (§5.1.1), on a stream that was opened and
	// closed a STREAM_CLOSED (§5.1).
	skipMemory = 4
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
	settingsAcked bool // the client acknowledged our SETTINGS
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
	recvWindow     int64 // connection-level, what the peer may still send us
	reserved       int64 // request bytes buffered or promised (stream windows), Σ stream.resv
	hist           *history
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

// idRange is a range of stream ids, both ends included.
type idRange struct{ lo, hi uint32 }

// history is what a Session remembers of its streams beyond the open ones;
// most connections never need it (made on first use, so that an idle
// Session stays small).
type history struct {
	waiting  []uint32  // streams waiting for window (widen)
	resets   []uint32  // the last streams we reset (ring of resetMemory)
	resetPos int       // next slot in resets
	skips    []idRange // the last ranges of skipped stream ids
}

// h returns the Session's history, making it if need be.
func (s *Session) h() *history {
	if s.hist == nil {
		s.hist = &history{}
	}
	return s.hist
}

type stream struct {
	id          uint32
	call        *Call // &callBuf once the headers named a known method
	callBuf     Call
	body        []byte
	bodyInline  [128]byte // the body of a small request
	recvUnacked int       // discarded bytes whose stream credit is not yet returned
	endRecv     bool
	answered    bool // the response is being written; more input is dropped
	out         bool // the call is queued for TakeCalls or taken, and not back yet

	// Receiving (RFC 9113 §6.9, §8.1.1).
	recvWindow int64 // what the client may still send on the stream
	resv       int64 // this stream's share of Session.reserved
	charged    int64 // bytes taken from Limits.Shared for body
	waiting    bool  // in Session.waiting: needs window the buffers lack
	contentLen int64 // the content-length header, -1 if none
	dataLen    int64 // DATA payload received (padding excluded)
	// early, if set, is the answer of a request that is not a gRPC call
	// (wrong content-type or method, no authority), with its HTTP status:
	// sent once the request ended, its data dropped meanwhile.
	early      *status.Status
	httpStatus int

	sendWindow int64
	pend       []byte // response DATA not yet written
	trailer    []hpack.HeaderField
}

// NewSession returns the Session of a newly accepted connection. Its output
// already holds the server preface (SETTINGS and a connection WINDOW_UPDATE);
// write it at once. remote is the peer's address, for peer.FromContext; it
// may be nil. lim should pass Validate (see there for what a zero limit does).
func NewSession(reg *Registry, lim Limits, remote net.Addr) *Session {
	lim = lim.sized()
	s := &Session{
		reg: reg, lim: lim,
		peerInitWindow: initialPeerWindow,
		peerMaxFrame:   maxFrameSize,
		sendWindow:     initialPeerWindow,
		recvWindow:     int64(lim.ConnWindow),
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
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: lim.StreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: lim.MaxHeaderListBytes},
	)
	if lim.ConnWindow > initialPeerWindow {
		_ = fr.WriteWindowUpdate(0, lim.ConnWindow-initialPeerWindow)
	}
	return s
}

// SetAuthInfo records what the driver learnt about the connection's
// security (for TLS, credentials.TLSInfo with the verified peer
// certificates): handlers read it as peer.FromContext(ctx).AuthInfo, as on
// a grpc-go server. Call it before the first Feed; it is shared by every
// call of the connection and costs them nothing.
func (s *Session) SetAuthInfo(ai credentials.AuthInfo) {
	if s.peer == nil {
		s.peer = &peer.Peer{}
	}
	s.peer.AuthInfo = ai
}

// Handshaken reports whether the client sent its preface and its first
// SETTINGS (RFC 9113 §3.4).
func (s *Session) Handshaken() bool { return s.settingsSeen }

// Buffered returns the request bytes the Session holds or has promised
// through its stream windows (what Limits.ConnBufferBytes bounds).
func (s *Session) Buffered() int64 { return s.reserved }

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
	// A frame that breaks the framing (too large, or out of place in a
	// header block) ends the connection, after the frames before it.
	whole, ferr := s.wholeFrames(buf[used:])
	if whole > 0 {
		s.rd.Reset(buf[used : used+whole])
		fr := s.framer()
		for s.rd.Len() > 0 {
			if s.skipFrame(buf[used+whole-s.rd.Len():]) {
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
	_, _ = s.rd.Seek(int64(frameHeaderLen+length), io.SeekCurrent)
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
				for _, x := range s.streams {
					x.recvWindow += d
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
			for _, x := range s.streams {
				x.sendWindow += delta
				if x.sendWindow > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
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
	return nil
}

func (s *Session) onWindowUpdate(f *http2.WindowUpdateFrame) error {
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
	} else if s.idle(f.StreamID) {
		return s.connError(http2.ErrCodeProtocol, fmt.Errorf("%w: WINDOW_UPDATE on idle stream %d", ErrProtocol, f.StreamID))
	}
	// (On a closed stream it is ignored: it may have crossed our END_STREAM.)
	s.unblock()
	return nil
}

// idle reports whether stream id is idle: never opened by the client (an
// id above the last it opened), or an even id, which only the server could
// open and never does.
func (s *Session) idle(id uint32) bool {
	return id%2 == 0 || id > s.lastStream
}

// openID records id as the client's newest stream; the ids it skipped are
// closed from now on (RFC 9113 §5.1.1) and remembered as never opened.
func (s *Session) openID(id uint32) {
	if id > s.lastStream+2 {
		r := idRange{s.lastStream + 2, id - 2}
		if s.lastStream == 0 {
			r.lo = 1
		}
		h := s.h()
		if len(h.skips) == skipMemory {
			copy(h.skips, h.skips[1:])
			h.skips = h.skips[:skipMemory-1]
		}
		h.skips = append(h.skips, r)
	}
	s.lastStream = id
}

// skipped reports whether the closed stream id was never opened.
func (s *Session) skipped(id uint32) bool {
	if s.hist == nil {
		return false
	}
	for _, r := range s.hist.skips {
		if id >= r.lo && id <= r.hi {
			return true
		}
	}
	return false
}

// resetByUs reports whether we reset stream id lately: frames the client
// sent before it saw the reset are ignored (§5.1, closed).
func (s *Session) resetByUs(id uint32) bool {
	if s.hist == nil {
		return false
	}
	for _, r := range s.hist.resets {
		if r == id {
			return true
		}
	}
	return false
}

func (s *Session) onHeaders(f *headerBlock) error {
	id := f.id
	if x := s.streams[id]; x != nil {
		return s.onTrailers(x, f)
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
		x := s.newStream(id, f.endStream)
		s.answer(x, status.Newf(codes.ResourceExhausted, "engine: header list larger than the limit of %d bytes", s.lim.MaxHeaderListBytes), nil)
		return nil
	}
	req, err := checkRequest(f.fields)
	if err != nil {
		// §8.1.1: a malformed request is a stream error.
		s.streamReset(id, http2.ErrCodeProtocol)
		return nil
	}
	x := s.newStream(id, f.endStream)
	x.contentLen = req.contentLen
	if req.early != nil {
		// Not a gRPC call: answered, as grpc-go does, with an HTTP status
		// once the request ended.
		x.early, x.httpStatus = req.early, req.httpStatus
		if x.endRecv {
			return s.endOfRequest(x, true)
		}
		return nil
	}
	c := &x.callBuf
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
				s.answer(x, status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", hf.Value), nil)
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

// newStream opens stream id with the initial receive window.
func (s *Session) newStream(id uint32, endStream bool) *stream {
	x := streams.Get().(*stream)
	x.id, x.sendWindow, x.endRecv = id, s.peerInitWindow, endStream
	x.contentLen = -1
	if !endStream {
		w := int64(s.lim.StreamWindow)
		if !s.settingsAcked {
			w = max(w, initialPeerWindow)
		}
		x.recvWindow = w
		s.setResv(x, w)
	}
	if s.streams == nil {
		s.streams = make(map[uint32]*stream)
	}
	s.streams[id] = x
	return x
}

// onTrailers takes a second header block on an open stream: trailers,
// which must end the stream and carry no pseudo fields (§8.1).
func (s *Session) onTrailers(x *stream, f *headerBlock) error {
	if x.endRecv {
		// §5.1: half-closed (remote).
		s.streamReset(x.id, http2.ErrCodeStreamClosed)
		return nil
	}
	if !f.endStream || f.selfDep || f.invalid != nil || f.truncated || hasPseudo(f.fields) {
		s.streamReset(x.id, http2.ErrCodeProtocol)
		return nil
	}
	return s.endOfRequest(x, true)
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
	x := s.streams[f.StreamID]
	if x == nil {
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
	if x.endRecv {
		// §5.1: half-closed (remote).
		s.streamReset(x.id, http2.ErrCodeStreamClosed)
		return nil
	}
	if n > x.recvWindow {
		s.streamReset(x.id, http2.ErrCodeFlowControl)
		return nil
	}
	x.recvWindow -= n
	data := f.Data()
	x.dataLen += int64(len(data))
	if x.contentLen >= 0 && (x.dataLen > x.contentLen || (f.StreamEnded() && x.dataLen != x.contentLen)) {
		// §8.1.1: DATA that differs from content-length is malformed.
		s.streamReset(x.id, http2.ErrCodeProtocol)
		return nil
	}
	if x.answered || x.early != nil {
		// Dropped: give the stream its credit back so the request can end.
		s.setResv(x, int64(len(x.body))+x.recvWindow)
		x.recvUnacked += int(n)
		if !f.StreamEnded() && x.recvUnacked >= int(s.lim.StreamWindow)/2 {
			_ = s.framer().WriteWindowUpdate(x.id, uint32(x.recvUnacked))
			x.recvWindow += int64(x.recvUnacked)
			s.setResv(x, int64(len(x.body))+x.recvWindow)
			x.recvUnacked = 0
		}
		return s.endOfRequest(x, f.StreamEnded())
	}
	if len(x.body)+len(data) > 5+s.lim.MaxRecvMsgBytes {
		s.tooLarge(x, len(x.body)+len(data)-5)
		return nil
	}
	// Padding is not kept: the stream's share shrinks by it.
	s.setResv(x, int64(len(x.body)+len(data))+x.recvWindow)
	if !s.grow(x, len(data)) {
		x.body = nil
		s.answer(x, status.New(codes.ResourceExhausted, "engine: the server's request buffers are full"), nil)
		return nil
	}
	x.body = append(x.body, data...)
	if len(x.body) >= 5 {
		size := int(binary.BigEndian.Uint32(x.body[1:5]))
		if size > s.lim.MaxRecvMsgBytes {
			s.tooLarge(x, size)
			return nil
		}
		if len(x.body) > 5+size {
			s.answer(x, status.Newf(codes.Internal, "engine: unary request for %s holds %d bytes after a %d-byte message", x.call.method, len(x.body)-5, size), nil)
			return nil
		}
		if !f.StreamEnded() && !x.waiting {
			s.widen(x, size)
		}
	}
	return s.endOfRequest(x, f.StreamEnded())
}

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

func (s *Session) tooLarge(x *stream, size int) {
	x.body = nil
	s.answer(x, status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, s.lim.MaxRecvMsgBytes), nil)
}

// endOfRequest queues the stream's call once the client half-closed.
func (s *Session) endOfRequest(x *stream, ended bool) error {
	if !ended || x.answered {
		if ended {
			x.endRecv = true
			s.setResv(x, int64(len(x.body)))
		}
		return nil
	}
	x.endRecv = true
	if x.contentLen >= 0 && x.dataLen != x.contentLen {
		s.streamReset(x.id, http2.ErrCodeProtocol)
		return nil
	}
	if x.early != nil {
		s.answer(x, x.early, nil)
		return nil
	}
	b := x.body
	x.body = nil
	s.setResv(x, int64(len(b)))
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
	if s.recvUnacked > 0 && (force || s.recvUnacked >= int(s.lim.ConnWindow)/4) {
		_ = s.framer().WriteWindowUpdate(0, uint32(s.recvUnacked))
		s.recvWindow += int64(s.recvUnacked)
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

// rst sends RST_STREAM and remembers that we reset the stream.
func (s *Session) rst(id uint32, code http2.ErrCode) {
	_ = s.framer().WriteRSTStream(id, code)
	h := s.h()
	if h.resets == nil {
		h.resets = make([]uint32, 0, resetMemory)
	}
	if len(h.resets) < resetMemory {
		h.resets = append(h.resets, id)
	} else {
		h.resets[h.resetPos] = id
		h.resetPos = (h.resetPos + 1) % resetMemory
	}
}

// drop forgets stream id (the client reset it, or it failed); a call of it
// that is running is cancelled where CancelOnReset allows.
func (s *Session) drop(id uint32) {
	x := s.streams[id]
	if x == nil {
		return
	}
	if x.call != nil && x.call.cancelable {
		x.call.abort()
	}
	delete(s.streams, id)
	s.release(x)
	s.retryWaiting()
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
