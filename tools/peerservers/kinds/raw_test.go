package kinds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// These tests speak HTTP/2 byte by byte, with x/net/http2's Framer over a
// plain TCP connection, where the grpc-go client would not misbehave.

// readUntil reads frames until want returns true, answering nothing; a
// GOAWAY or a read error fails the test.
func readUntil(t *testing.T, fr *http2.Framer, what string, want func(http2.Frame) bool) {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("waiting for %s: got GOAWAY %v %q", what, ga.ErrCode, ga.DebugData())
		}
		if want(f) {
			return
		}
	}
}

func TestRawPing(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		c := rawDial(t, s.addr)
		c.SetDeadline(time.Now().Add(eventually))
		fr := h2Start(t, c)

		// The server's preface is a SETTINGS frame.
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server preface: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
			t.Fatalf("server's first frame is %v, want SETTINGS", f.Header())
		}
		if err := fr.WriteSettingsAck(); err != nil {
			t.Fatal(err)
		}

		// One PING, then three in a single write; every ACK carries its
		// payload, in order.
		if err := fr.WritePing(false, [8]byte{'l', 'f', 't', 'e', 's', 't', 0, 1}); err != nil {
			t.Fatal(err)
		}
		var batch bytes.Buffer
		bf := http2.NewFramer(&batch, nil)
		payloads := [][8]byte{{'l', 'f', 't', 'e', 's', 't', 0, 1}, {1, 2, 3, 4, 5, 6, 7, 8}, {0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0}, {}}
		for _, p := range payloads[1:] {
			if err := bf.WritePing(false, p); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		for i, p := range payloads {
			readUntil(t, fr, "PING ACK", func(f http2.Frame) bool {
				pf, ok := f.(*http2.PingFrame)
				if !ok || !pf.IsAck() {
					return false
				}
				if pf.Data != p {
					t.Fatalf("PING ACK #%d carries %x, want %x", i, pf.Data, p)
				}
				return true
			})
		}
	})
}

// rawFrame returns the bytes of a frame with any header fields, valid or not.
func rawFrame(length uint32, typ http2.FrameType, flags http2.Flags, stream uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(length>>16), byte(length>>8), byte(length)
	b[3], b[4] = byte(typ), byte(flags)
	binary.BigEndian.PutUint32(b[5:], stream)
	return append(b, payload...)
}

// headersFrame returns a complete HEADERS frame opening a gRPC call to
// method on stream.
func headersFrame(t *testing.T, stream uint32, method string) []byte {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: "lftest"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	} {
		if err := enc.WriteField(hf); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// preface is the client preface followed by an empty SETTINGS frame.
var preface = append([]byte(http2.ClientPreface), rawFrame(0, http2.FrameSettings, 0, 0, nil)...)

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func closeWrite(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
}

func TestBadPeers(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		mustEcho(t, cc, 1)
		base := snapshot()
		hdr := headersFrame(t, 1, echo.MethodEcho)

		// Each peer gets its connection closed by the server.
		closed := []struct {
			name  string
			bytes []byte
			eof   bool // half-close after writing
		}{
			{name: "random bytes", bytes: pattern(512, 99)},
			{name: "HTTP/1.1 request", bytes: []byte("GET / HTTP/1.1\r\nHost: lftest\r\nConnection: keep-alive\r\n\r\n")},
			{name: "bad preface", bytes: []byte("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")},
			{name: "preface without SETTINGS", bytes: cat([]byte(http2.ClientPreface), rawFrame(8, http2.FramePing, 0, 0, make([]byte, 8)))},
			{name: "short preface then EOF", bytes: []byte("PRI * HTTP/2.0\r\n"), eof: true},
			{name: "SETTINGS of bad length", bytes: cat(preface, rawFrame(5, http2.FrameSettings, 0, 0, make([]byte, 5)))},
			{name: "DATA on stream 0", bytes: cat(preface, rawFrame(5, http2.FrameData, 0, 0, make([]byte, 5)))},
			{name: "HEADERS on an even stream", bytes: cat(preface, headersFrame(t, 2, echo.MethodEcho))},
			{name: "frame over max size", bytes: cat(preface, rawFrame(1<<24-1, http2.FrameData, 0, 1, make([]byte, 1024)))},
			{name: "half a HEADERS frame then EOF", bytes: cat(preface, hdr[:len(hdr)/2]), eof: true},
			{name: "half a frame header then EOF", bytes: cat(preface, hdr[:4]), eof: true},
		}
		for _, p := range closed {
			t.Run(p.name, func(t *testing.T) {
				// Three at once: a leak per connection adds up.
				var cs []net.Conn
				for range 3 {
					c := rawDial(t, s.addr)
					if _, err := c.Write(p.bytes); err != nil {
						t.Fatalf("write: %v", err)
					}
					if p.eof {
						closeWrite(t, c)
					}
					cs = append(cs, c)
				}
				for _, c := range cs {
					expectClosed(t, c, p.name)
					c.Close()
				}
				mustEcho(t, cc, 100)
			})
		}

		// A peer that stops mid-frame and stays silent may be kept; it
		// must not hold up anyone else.
		t.Run("silent mid-frame", func(t *testing.T) {
			var silent []net.Conn
			for _, b := range [][]byte{cat(preface, hdr[:len(hdr)/2]), cat(preface, hdr[:4]), []byte(http2.ClientPreface[:10])} {
				c := rawDial(t, s.addr)
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
				silent = append(silent, c)
			}
			mustEcho(t, cc, 100)
			mustEcho(t, cc, 100<<10)
			cc2, _ := dial(t, s.addr)
			mustEcho(t, cc2, 100)
			cc2.Close()
			for _, c := range silent {
				c.Close()
			}
		})

		if got := d.dials.Load(); got != 1 {
			t.Errorf("the good client connected %d times, want 1", got)
		}
		// Every bad connection is gone from the server.
		expectNoGrowth(t, base, 2, "after the bad peers left")
	})
}

// TestConnectCloseCycles checks that connections leave nothing behind while
// the server runs, and that Stop leaves nothing of the server.
func TestConnectCloseCycles(t *testing.T) {
	const cycles = 30
	forKinds(t, func(t *testing.T, kind string) {
		before, serversBefore := snapshot(), len(serverGoroutines())
		s := start(t, kind, Options{})
		clientCycle := func(i int) {
			cc := dialWith(t, s.addr, new(dialer))
			mustEcho(t, cc, i)
			if err := cc.Close(); err != nil {
				t.Fatal(err)
			}
		}
		clientCycle(1) // warm up whatever grpc-go starts once
		base := snapshot()
		for i := range cycles {
			clientCycle(i * 100)
		}
		for range cycles {
			c := rawDial(t, s.addr)
			c.SetDeadline(time.Now().Add(eventually))
			fr := h2Start(t, c)
			if _, err := fr.ReadFrame(); err != nil { // the server's SETTINGS: it took the connection
				t.Fatalf("read server preface: %v", err)
			}
			c.Close()
		}
		// Also connections closed before the server saw any byte.
		for range cycles {
			c := rawDial(t, s.addr)
			c.Close()
		}
		expectNoGrowth(t, base, 3, "after connect/close cycles")

		s.stop(t)
		select {
		case <-s.serveDone:
		case <-time.After(eventually):
			t.Fatal("Serve did not return after Stop")
		}
		deadline := time.Now().Add(eventually)
		// Other servers (TestKeepalive's) may be running; they only end.
		for g := serverGoroutines(); len(g) > serversBefore; g = serverGoroutines() {
			if time.Now().After(deadline) {
				t.Fatalf("%d server goroutines running %v after Stop, %d before Start:\n%s",
					len(g), eventually, serversBefore, strings.Join(g, "\n\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		expectNoGrowth(t, before, 2, "after Stop")

		// The listener is closed: a dial is refused, or at least not kept.
		if c, err := net.DialTimeout("tcp", s.addr, eventually); err == nil {
			c.SetReadDeadline(time.Now().Add(eventually))
			_, err = c.Read(make([]byte, 1))
			c.Close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("after Stop the old port still accepts and keeps connections")
			}
		}
	})
}
