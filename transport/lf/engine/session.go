package engine

import (
	"bytes"
	"context"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
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

	borrowed    *pooledFramer // borrowed while busy (see pool.go)
	outPooled   *[]byte       // the pooled buffer behind out
	frameReader bytes.Reader
	headerDec   *hpack.Decoder
	headerEnc   *hpack.Encoder
	headerBuf   bytes.Buffer

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
	reserved       int64 // request bytes buffered or promised (stream windows), Σ stream.reserved
	history        *streamHistory
	blocked        []uint32
	fields         []hpack.HeaderField // scratch for answers
	sizeUpdateSent bool                // headerEnc sent its table size update

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
	s.headerDec = hpack.NewDecoder(4096, s.emit)
	s.headerEnc = hpack.NewEncoder(&s.headerBuf)
	// No dynamic table for what we send: its index maps cost ~1 KB per
	// connection, and our answers are a handful of short fields that
	// encode to a few bytes anyway (static-table names, Huffman values).
	s.headerEnc.SetMaxDynamicTableSizeLimit(0)
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
// blocks) from s.frameReader.
func (s *Session) framer() *http2.Framer {
	if s.borrowed == nil {
		s.grabOut()
		pooled := framers.Get().(*pooledFramer)
		pooled.io.s = s
		pooled.framer.MaxHeaderListSize = s.lim.MaxHeaderListBytes
		s.borrowed = pooled
	}
	return s.borrowed.framer
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
	if len(s.in) == 0 && s.borrowed != nil {
		// The HPACK state lives in hdec/henc, not in the Framer.
		s.borrowed.io.s = nil
		framers.Put(s.borrowed)
		s.borrowed = nil
		s.frameReader.Reset(nil)
	}
	if len(s.Output()) == 0 {
		s.releaseOut()
	}
	if len(s.streams) == 0 {
		if s.headerBuf.Cap() > 0 {
			s.headerBuf = bytes.Buffer{}
		}
		s.fields = nil
	}
}
