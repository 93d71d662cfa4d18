//go:build linux

package lf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// h2conn is a raw HTTP/2 client connection for the conformance table: it
// writes frames (valid or not) with x/net's Framer and hpack, and reads the
// server's answers.
type h2conn struct {
	t    *testing.T
	c    net.Conn
	buf  bytes.Buffer  // frames not yet written
	w    *http2.Framer // writes into buf
	r    *http2.Framer // reads from c
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	// What the server said in its SETTINGS.
	initWindow uint32
	ended      map[uint32]bool // streams the server ended (END_STREAM or RST_STREAM)
	leftOpen   bool            // the server sent GOAWAY for an error and kept the connection open
	data       map[uint32]int  // DATA payload bytes received per stream
}

const pingMarker = "lf-conf!"

// dialH2 connects to addr, sends the client preface and a SETTINGS frame
// with settings, reads the server's SETTINGS and acknowledges it.
func dialH2(t *testing.T, addr string, settings ...http2.Setting) *h2conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2conn{t: t, c: c, initWindow: 65535, ended: map[uint32]bool{}, data: map[uint32]int{}}
	h.w = http2.NewFramer(&h.buf, nil)
	h.r = http2.NewFramer(nil, c)
	h.r.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.r.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.buf.WriteString(http2.ClientPreface)
	_ = h.w.WriteSettings(settings...)
	h.flush()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := h.r.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			if v, ok := sf.Value(http2.SettingInitialWindowSize); ok {
				h.initWindow = v
			}
			break
		}
	}
	_ = h.w.WriteSettingsAck()
	h.flush()
	return h
}

// flush writes the frames queued so far in one write.
func (h *h2conn) flush() {
	if h.buf.Len() == 0 {
		return
	}
	h.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = h.c.Write(h.buf.Bytes()) // a server may close first: the answer tells
	h.buf.Reset()
}

// raw queues a frame with any header fields, valid or not.
func (h *h2conn) raw(typ http2.FrameType, flags http2.Flags, stream uint32, payload []byte) {
	b := make([]byte, 9, 9+len(payload))
	n := len(payload)
	b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
	b[3], b[4] = byte(typ), byte(flags)
	binary.BigEndian.PutUint32(b[5:], stream)
	h.buf.Write(append(b, payload...))
}

// block encodes fields (name, value, name, value, ...).
func (h *h2conn) block(fields ...string) []byte {
	h.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(h.hbuf.Bytes())
}

// grpcFields are the request fields of a gRPC call to method.
func grpcFields(method string) []string {
	return []string{":method", "POST", ":scheme", "http", ":path", method, ":authority", "lf",
		"content-type", "application/grpc", "te", "trailers"}
}

// headers queues a HEADERS frame with fields, END_HEADERS set.
func (h *h2conn) headers(id uint32, end bool, fields ...string) {
	_ = h.w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(fields...), EndHeaders: true, EndStream: end})
}

// call queues a whole gRPC call to method with message msg.
func (h *h2conn) call(id uint32, method string, msg []byte) {
	h.headers(id, false, grpcFields(method)...)
	_ = h.w.WriteData(id, true, grpcMsg(msg))
}

// grpcMsg is msg with its 5-byte gRPC prefix.
func grpcMsg(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

func echoMsg(n int) []byte {
	b, _ := proto.Marshal(wrapperspb.Bytes(bytes.Repeat([]byte{'e'}, n)))
	return b
}

func sleepMsg(d time.Duration) []byte {
	b, _ := proto.Marshal(durationpb.New(d))
	return b
}

// waitEnd reads until the server ended stream id.
func (h *h2conn) waitEnd(id uint32) {
	h.flush()
	h.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !h.ended[id] {
		f, err := h.r.ReadFrame()
		if err != nil {
			h.t.Fatalf("waiting for stream %d to end: %v", id, err)
		}
		h.note(f)
	}
}

// note records what f says of the streams.
func (h *h2conn) note(f http2.Frame) {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if f.StreamEnded() {
			h.ended[f.StreamID] = true
		}
	case *http2.DataFrame:
		h.data[f.StreamID] += len(f.Data())
		if f.StreamEnded() {
			h.ended[f.StreamID] = true
		}
	case *http2.RSTStreamFrame:
		h.ended[f.StreamID] = true
	}
}

// outcome sends a PING and reads the server's answer to what was sent:
// "GOAWAY <code>" (leftOpen tells whether the connection stayed open a
// second after an error), "RST_STREAM <code>" (codes other than NO_ERROR), "response
// <status>" (a response other than 200), "closed", "no answer", or
// "ignored" (the PING was answered and nothing went wrong).
func (h *h2conn) outcome() string {
	_ = h.w.WritePing(false, [8]byte([]byte(pingMarker)))
	h.flush()
	deadline := time.Now().Add(3 * time.Second)
	pinged := false
	for {
		h.c.SetReadDeadline(deadline)
		f, err := h.r.ReadFrame()
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			if pinged {
				return "ignored"
			}
			return "no answer"
		case err != nil:
			return "closed"
		}
		h.note(f)
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			h.leftOpen = f.ErrCode != http2.ErrCodeNo && !h.closes()
			return "GOAWAY " + f.ErrCode.String()
		case *http2.RSTStreamFrame:
			if f.ErrCode != http2.ErrCodeNo {
				return "RST_STREAM " + f.ErrCode.String()
			}
		case *http2.MetaHeadersFrame:
			if st := f.PseudoValue("status"); st != "" && st != "200" {
				return "response " + st
			}
		case *http2.PingFrame:
			if f.IsAck() && string(f.Data[:]) == pingMarker && !pinged {
				// Give a late answer (grpc-go answers from other
				// goroutines) a moment.
				pinged, deadline = true, time.Now().Add(150*time.Millisecond)
			}
		}
	}
}

// closes reports whether the server closes the connection within a second.
func (h *h2conn) closes() bool {
	h.c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := io.Copy(io.Discard, h.c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// dataAfter sends what is queued and returns the DATA bytes the server
// sends on stream id within wait.
func (h *h2conn) dataAfter(id uint32, wait time.Duration) int {
	h.flush()
	before := h.data[id]
	deadline := time.Now().Add(wait)
	for {
		h.c.SetReadDeadline(deadline)
		f, err := h.r.ReadFrame()
		if err != nil {
			return h.data[id] - before
		}
		h.note(f)
	}
}

var (
	methodEcho  = echo.MethodEcho
	methodSleep = echo.MethodSleep
)

// setting is one SETTINGS parameter, as raw bytes (any value).
func setting(id http2.SettingID, v uint32) []byte {
	var b [6]byte
	binary.BigEndian.PutUint16(b[:], uint16(id))
	binary.BigEndian.PutUint32(b[2:], v)
	return b[:]
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// oneOf reports whether got is one of the outcomes in want ("a | b").
func oneOf(got, want string) bool {
	for _, w := range strings.Split(want, " | ") {
		if got == w {
			return true
		}
	}
	return false
}

func mdRow(cells ...string) string { return "| " + strings.Join(cells, " | ") + " |" }
