//go:build linux

package main

// The raw client: a minimal HTTP/2 gRPC client for the closed-loop Echo
// shapes, built on x/net/http2's Framer over a plain net.Conn. The stock
// grpc-go client costs ~18 µs of CPU per call (a goroutine hand-off per
// call, its own HPACK encoder, the ClientStream machinery), so on its one
// core it saturates near 50k calls/s and hides the differences between the
// faster servers. This one does per call roughly what the wire needs:
//
//   - one goroutine per connection does everything for that connection:
//     it reads frames, completes calls, issues the next call on the freed
//     slot, answers SETTINGS and PING, returns flow-control credit, and
//     flushes its bufio.Writer once per read batch (when its bufio.Reader
//     has nothing buffered, just before a read that may block);
//   - the request HEADERS block is built once per run and is stateless
//     HPACK (every field a "literal without indexing, new name", no
//     Huffman), so the same bytes are valid on every stream and the
//     server's dynamic table never changes;
//   - the request message (5-byte gRPC prefix + a marshaled BytesValue) is
//     built once too; DATA is split at the server's MAX_FRAME_SIZE and sent
//     within the server's connection and stream windows (tracked from
//     SETTINGS and WINDOW_UPDATE), queued FIFO when a window is closed;
//   - a call completes on the header block that carries END_STREAM (the
//     trailers, or a trailers-only response; decoded with one
//     hpack.Decoder per connection, fields other than grpc-status,
//     grpc-message and :status ignored): it succeeds when grpc-status
//     is "0" and the DATA received equals the request message's size (the
//     Echo answer is the same BytesValue). Its latency runs from just
//     before its HEADERS went into the write buffer to the trailers' read.
//
// Each connection keeps its callers' worth of calls outstanding (never more
// than the server's MAX_CONCURRENT_STREAMS). Responses are not unmarshaled.
// The client advertises a 1 MiB stream window and a 16 MiB connection
// window and returns connection credit in batches of 1 MiB.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	rawStreamWindow = 1 << 20  // INITIAL_WINDOW_SIZE we advertise
	rawConnWindow   = 16 << 20 // connection window we grant
	rawConnRefill   = 1 << 20  // return connection credit once this much is consumed
	rawBufSize      = 64 << 10 // bufio sizes per connection
)

// rawRequest is what every call of a run sends.
type rawRequest struct {
	header  []byte              // HPACK block, stateless (every field a literal)
	fields  []hpack.HeaderField // the same fields but grpc-timeout, for a stateful encoder
	timeout time.Duration
	msg     []byte // gRPC length-prefixed message
}

// newRawRequest builds the Echo request for authority with payload bytes
// and the given grpc-timeout.
func newRawRequest(authority, method string, payload []byte, timeout time.Duration) (rawRequest, error) {
	m, err := proto.Marshal(wrapperspb.Bytes(payload))
	if err != nil {
		return rawRequest{}, err
	}
	msg := make([]byte, 5+len(m))
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(m)))
	copy(msg[5:], m)
	var h []byte
	for _, f := range [][2]string{
		{":method", "POST"},
		{":scheme", "http"},
		{":path", method},
		{":authority", authority},
		{"content-type", "application/grpc"},
		{"te", "trailers"},
		{"grpc-timeout", grpcTimeout(timeout)},
	} {
		h = hpackLiteral(h, f[0], f[1])
	}
	// What a grpc-go client sends, in its order; its encoder indexes every
	// field, so from the second call on most of them are one byte.
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: "grpc-go/" + grpc.Version}, {Name: "te", Value: "trailers"},
	}
	return rawRequest{header: h, fields: fields, timeout: timeout, msg: msg}, nil
}

// hpackLiteral appends a "literal header field without indexing — new
// name" (RFC 7541 §6.2.2: 0x00, then name and value as raw strings).
func hpackLiteral(b []byte, name, value string) []byte {
	b = append(b, 0x00)
	b = hpackString(b, name)
	return hpackString(b, value)
}

// hpackString appends a string literal without Huffman coding: H=0 and a
// 7-bit prefix length (RFC 7541 §5.1, §5.2).
func hpackString(b []byte, s string) []byte {
	n := uint64(len(s))
	if n < 127 {
		b = append(b, byte(n))
	} else {
		b = append(b, 127)
		n -= 127
		for n >= 128 {
			b = append(b, byte(n)|0x80)
			n >>= 7
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// grpcGoTimeout encodes d as grpc-go's client does: the finest unit whose
// value (rounded up) fits in 8 digits.
func grpcGoTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range []struct {
		unit time.Duration
		c    string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		if v := (d + u.unit - 1) / u.unit; v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.c
		}
	}
	return strconv.FormatInt(int64((d+time.Hour-1)/time.Hour), 10) + "H"
}

// grpcTimeout encodes d as a grpc-timeout value (at most 8 digits).
func grpcTimeout(d time.Duration) string {
	if d <= 0 {
		d = time.Nanosecond
	}
	for _, u := range []struct {
		unit time.Duration
		c    string
	}{{time.Hour, "H"}, {time.Minute, "M"}, {time.Second, "S"}, {time.Millisecond, "m"}, {time.Microsecond, "u"}} {
		if d%u.unit == 0 && d/u.unit < 1e8 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.c
		}
	}
	for _, u := range []struct {
		unit time.Duration
		c    string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}} {
		if d/u.unit < 1e8 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.c
		}
	}
	return strconv.FormatInt(int64(d/time.Hour), 10) + "H"
}

// rawStream is one slot of a connection: at most one call at a time.
type rawStream struct {
	id      uint32 // 0: free
	start   time.Time
	sent    int   // bytes of the message sent
	sendWin int64 // our send window on this stream
	recv    int   // DATA payload received
	unacked uint32
	status  string
	msg     string // grpc-message
	pending bool   // in the send queue
}

// rawConn is one HTTP/2 connection and its closed loop.
type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	fr  *http2.Framer
	req *rawRequest
	rec func(time.Time, error)
	end *atomic.Bool // the run is over: issue nothing, count nothing

	maxStreams uint32 // server's MAX_CONCURRENT_STREAMS
	maxFrame   int    // server's MAX_FRAME_SIZE
	initWin    int64  // server's INITIAL_WINDOW_SIZE: our send window of a new stream
	connWin    int64  // our connection send window
	unacked    uint32 // connection-level bytes received, credit not yet returned

	henc  *hpack.Encoder // stateful, like grpc-go's (indexes every field)
	hbuf  bytes.Buffer
	hdec  *hpack.Decoder
	hslot int  // slot of the header block being decoded, -1: none
	hend  bool // that block's HEADERS frame ends the stream

	ready  bool // loop runs: calls may be issued
	nextID uint32
	active int
	slots  []rawStream
	queue  []int // slots with DATA left to send, FIFO
}

// rawDial connects and does the HTTP/2 handshake: our preface, SETTINGS
// and connection WINDOW_UPDATE, then frames until the server's SETTINGS,
// which it ACKs.
func rawDial(addr string, callers int, req *rawRequest, rec func(time.Time, error), end *atomic.Bool) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if clientTLS != nil {
		tc := tls.Client(c, clientTLS)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	rc := &rawConn{
		c: c, br: bufio.NewReaderSize(c, rawBufSize), bw: bufio.NewWriterSize(c, rawBufSize),
		req: req, rec: rec, end: end,
		maxStreams: ^uint32(0), maxFrame: 16384, initWin: 65535, connWin: 65535,
		nextID: 1, slots: make([]rawStream, callers),
	}
	rc.fr = http2.NewFramer(rc.bw, rc.br)
	// Header blocks are decoded here rather than with the Framer's
	// ReadMetaHeaders, which allocates a frame and a field slice per block.
	rc.hdec = hpack.NewDecoder(4096, rc.emit)
	rc.henc = hpack.NewEncoder(&rc.hbuf)
	rc.hdec.SetMaxStringLength(64 << 10)
	rc.fr.SetReuseFrames()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(rc.bw, http2.ClientPreface)
	rc.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: rawStreamWindow})
	rc.fr.WriteWindowUpdate(0, rawConnWindow-65535)
	if err := rc.bw.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("handshake: %w", err)
		}
		settings, err := rc.handle(f)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("handshake: %w", err)
		}
		if settings {
			break
		}
	}
	if err := rc.bw.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return rc, nil
}

// loop runs the closed loop until the connection fails or is closed.
func (rc *rawConn) loop() error {
	rc.ready = true
	rc.fill()
	for {
		if rc.br.Buffered() == 0 && rc.bw.Buffered() > 0 {
			if err := rc.bw.Flush(); err != nil {
				return rc.fail(err)
			}
		}
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return rc.fail(err)
		}
		if _, err := rc.handle(f); err != nil {
			return rc.fail(err)
		}
	}
}

// fail ends the connection: the calls still outstanding fail with err
// (unless the run is over, when the read error is the closing).
func (rc *rawConn) fail(err error) error {
	rc.c.Close()
	if rc.end.Load() {
		return nil
	}
	for i := range rc.slots {
		if s := &rc.slots[i]; s.id != 0 {
			rc.rec(s.start, fmt.Errorf("stream %d: connection: %w", s.id, err))
			s.id = 0
		}
	}
	return err
}

// handle processes one frame; settings reports a (non-ACK) SETTINGS frame.
func (rc *rawConn) handle(f http2.Frame) (settings bool, err error) {
	switch f := f.(type) {
	case *http2.DataFrame:
		n := f.Header().Length // flow control counts padding too
		if n > 0 {
			rc.unacked += n
			if rc.unacked >= rawConnRefill {
				rc.fr.WriteWindowUpdate(0, rc.unacked)
				rc.unacked = 0
			}
		}
		i := rc.slot(f.StreamID)
		if i < 0 {
			return false, nil // a stream we gave up on
		}
		s := &rc.slots[i]
		s.recv += len(f.Data())
		if f.StreamEnded() {
			rc.finish(i, errors.New("response ended without trailers"))
			return false, nil
		}
		if s.unacked += n; s.unacked >= rawStreamWindow/2 {
			rc.fr.WriteWindowUpdate(s.id, s.unacked)
			s.unacked = 0
		}
	case *http2.HeadersFrame:
		rc.hslot, rc.hend = rc.slot(f.StreamID), f.StreamEnded()
		return false, rc.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		return false, rc.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.RSTStreamFrame:
		if i := rc.slot(f.StreamID); i >= 0 {
			rc.finish(i, fmt.Errorf("RST_STREAM %v", f.ErrCode))
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			rc.connWin += int64(f.Increment)
		} else if i := rc.slot(f.StreamID); i >= 0 {
			rc.slots[i].sendWin += int64(f.Increment)
		}
		rc.push()
	case *http2.SettingsFrame:
		if f.IsAck() {
			return false, nil
		}
		err := f.ForeachSetting(func(s http2.Setting) error {
			switch s.ID {
			case http2.SettingMaxConcurrentStreams:
				rc.maxStreams = s.Val
			case http2.SettingMaxFrameSize:
				rc.maxFrame = int(s.Val)
			case http2.SettingInitialWindowSize:
				d := int64(s.Val) - rc.initWin
				rc.initWin = int64(s.Val)
				for i := range rc.slots {
					if rc.slots[i].id != 0 {
						rc.slots[i].sendWin += d
					}
				}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		rc.fr.WriteSettingsAck()
		rc.push()
		rc.fill()
		return true, nil
	case *http2.PingFrame:
		if !f.IsAck() {
			rc.fr.WritePing(true, f.Data)
		}
	case *http2.GoAwayFrame:
		return false, fmt.Errorf("GOAWAY %v %q", f.ErrCode, f.DebugData())
	}
	return false, nil
}

// headerBlock decodes a fragment of a header block (every block, also of
// streams no longer tracked, to keep the decoder's table in step); at the
// end of a block that ends its stream it completes the call.
func (rc *rawConn) headerBlock(frag []byte, ended bool) error {
	if _, err := rc.hdec.Write(frag); err != nil {
		return fmt.Errorf("HPACK: %w", err)
	}
	if !ended {
		return nil
	}
	if err := rc.hdec.Close(); err != nil {
		return fmt.Errorf("HPACK: %w", err)
	}
	i := rc.hslot
	if i < 0 || !rc.hend {
		return nil
	}
	s := &rc.slots[i]
	var err error
	switch {
	case s.status != "0":
		err = fmt.Errorf("grpc-status %q: %s", s.status, s.msg)
	case s.recv != len(rc.req.msg):
		err = fmt.Errorf("echo returned %d bytes of DATA, sent %d", s.recv, len(rc.req.msg))
	}
	rc.finish(i, err)
	return nil
}

// emit takes a decoded header field of the current block.
func (rc *rawConn) emit(hf hpack.HeaderField) {
	if rc.hslot < 0 {
		return
	}
	s := &rc.slots[rc.hslot]
	switch hf.Name {
	case "grpc-status":
		s.status = hf.Value
	case "grpc-message":
		s.msg = hf.Value
	case ":status":
		if hf.Value != "200" {
			s.msg, s.status = "HTTP status "+hf.Value, "?"
		}
	}
}

// slot finds the slot of stream id, -1 if none.
func (rc *rawConn) slot(id uint32) int {
	if id == 0 {
		return -1
	}
	for i := range rc.slots {
		if rc.slots[i].id == id {
			return i
		}
	}
	return -1
}

// finish completes the call in slot i and issues the next one.
func (rc *rawConn) finish(i int, err error) {
	s := &rc.slots[i]
	if !rc.end.Load() {
		rc.rec(s.start, err)
	}
	if s.pending {
		for j, q := range rc.queue {
			if q == i {
				rc.queue = append(rc.queue[:j], rc.queue[j+1:]...)
				break
			}
		}
	}
	*s = rawStream{}
	rc.active--
	rc.fill()
}

// fill issues calls on free slots up to the server's stream limit, once
// loop has started.
func (rc *rawConn) fill() {
	if !rc.ready || rc.end.Load() {
		return
	}
	for i := range rc.slots {
		if uint32(rc.active) >= rc.maxStreams {
			return
		}
		if rc.slots[i].id == 0 {
			rc.send(i)
		}
	}
}

// send starts a call in free slot i: HEADERS, then as much DATA as the
// windows allow.
func (rc *rawConn) send(i int) {
	s := &rc.slots[i]
	*s = rawStream{id: rc.nextID, sendWin: rc.initWin, start: time.Now()}
	rc.nextID += 2
	rc.active++
	rc.hbuf.Reset()
	for _, f := range rc.req.fields {
		rc.henc.WriteField(f)
	}
	// grpc-go encodes the time left until the call's deadline.
	rc.henc.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: grpcGoTimeout(time.Until(s.start.Add(rc.req.timeout)))})
	rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: rc.hbuf.Bytes(), EndHeaders: true})
	if len(rc.queue) > 0 || !rc.sendData(i) {
		s.pending = true
		rc.queue = append(rc.queue, i)
	}
}

// sendData writes DATA of slot i while the windows allow; it reports
// whether the whole message went out.
func (rc *rawConn) sendData(i int) bool {
	s := &rc.slots[i]
	msg := rc.req.msg
	for s.sent < len(msg) {
		n := int64(min(len(msg)-s.sent, rc.maxFrame))
		n = min(n, rc.connWin, s.sendWin)
		if n <= 0 {
			return false
		}
		end := s.sent+int(n) == len(msg)
		rc.fr.WriteData(s.id, end, msg[s.sent:s.sent+int(n)])
		s.sent += int(n)
		rc.connWin -= n
		s.sendWin -= n
	}
	return true
}

// push sends queued DATA, in order, while the windows allow.
func (rc *rawConn) push() {
	for len(rc.queue) > 0 {
		i := rc.queue[0]
		if !rc.sendData(i) {
			return
		}
		rc.slots[i].pending = false
		rc.queue = append(rc.queue[:0], rc.queue[1:]...)
	}
}

// rawLoad is a running closed-loop load over raw connections.
type rawLoad struct {
	conns []*rawConn
	end   atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error // first connection failure
}

// startRawLoad dials conns connections to addr and keeps callers calls
// outstanding in total (caller i on connection i%conns, as the grpc-go
// load spreads them), each sending payload with the given grpc-timeout;
// rec gets every completed call.
func startRawLoad(addr string, conns, callers int, payload []byte, timeout time.Duration, rec func(time.Time, error)) (*rawLoad, error) {
	req, err := newRawRequest(addr, echoMethod, payload, timeout)
	if err != nil {
		return nil, err
	}
	l := &rawLoad{}
	for i := 0; i < conns; i++ {
		n := callers / conns
		if i < callers%conns {
			n++
		}
		rc, err := rawDial(addr, n, &req, rec, &l.end)
		if err != nil {
			l.stop()
			return nil, fmt.Errorf("connect %d/%d: %w", i+1, conns, err)
		}
		l.conns = append(l.conns, rc)
	}
	for _, rc := range l.conns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := rc.loop(); err != nil {
				l.mu.Lock()
				if l.err == nil {
					l.err = err
				}
				l.mu.Unlock()
			}
		}()
	}
	return l, nil
}

// stop ends the load: nothing more is issued or counted, the connections
// close and their goroutines exit. It returns the first connection failure
// seen before the stop, if any.
func (l *rawLoad) stop() error {
	l.end.Store(true)
	for _, rc := range l.conns {
		rc.c.Close()
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
