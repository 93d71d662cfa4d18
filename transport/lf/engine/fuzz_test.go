package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientFrames is what a fuzzing "client" sends: the preface and an empty
// SETTINGS.
func clientStart() []byte {
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	_ = fr.WriteSettings()
	return b.Bytes()
}

// request returns HEADERS for method on stream id followed by DATA frames
// carrying body (split at 16 KiB), the last one ending the stream.
func request(enc *hpack.Encoder, hb *bytes.Buffer, id uint32, method string, body []byte) []byte {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	hb.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "x"}, {Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"}} {
		_ = enc.WriteField(f)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
	for first := true; first || len(body) > 0; first = false {
		n := min(len(body), 16384)
		_ = fr.WriteData(id, n == len(body), body[:n])
		body = body[n:]
	}
	return b.Bytes()
}

// readAll parses every frame of the server's output; it fails the test on a
// frame a client could not parse, and returns the streams that were ended
// (by END_STREAM on HEADERS or by RST_STREAM).
func readAll(t *testing.T, out []byte) map[uint32]bool {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(out))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	ended := map[uint32]bool{}
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return ended
		}
		if err != nil {
			t.Fatalf("server wrote an unparsable frame: %v", err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				switch f.PseudoValue("status") {
				case "", "200", "400", "405", "415": // grpc-go's answers to requests that are no gRPC calls
				default:
					t.Fatalf("stream %d: :status %q", f.StreamID, f.PseudoValue("status"))
				}
				ended[f.StreamID] = true
			}
		case *http2.RSTStreamFrame:
			ended[f.StreamID] = true
		}
	}
}

func fuzzRegistry() *Registry {
	reg := NewRegistry()
	reg.RegisterService(&testDesc, nil)
	return reg
}

// FuzzFeed feeds arbitrary bytes after a valid preface, in two pieces. The
// Session must never panic, must only write parsable frames, and after an
// error must report Done.
func FuzzFeed(f *testing.F) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	f.Add(request(enc, &hb, 1, "/enginetest.T/Echo", []byte{0, 0, 0, 0, 2, 10, 0}), uint16(7))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), uint16(3))
	f.Add([]byte{0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, uint16(4)) // PING
	f.Add([]byte{0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint16(0))             // WINDOW_UPDATE 0
	// HEADERS without END_HEADERS, then PRIORITY inside the block; a
	// self-dependent PRIORITY; a stream's message claiming 60,000 bytes.
	f.Add(append(request(enc, &hb, 3, "/enginetest.T/Echo", nil)[:9+5], 0, 0, 5, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 16), uint16(9))
	f.Add([]byte{0, 0, 5, 2, 0, 0, 0, 0, 5, 0, 0, 0, 5, 16}, uint16(2))
	f.Add(request(enc, &hb, 5, "/enginetest.T/Echo", append([]byte{0, 0, 0, 0xea, 0x60}, make([]byte, 20000)...)), uint16(100))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		shared := NewBudget(1 << 20)
		lim := configured(Limits{MaxRecvMsgBytes: 1 << 16, MaxConcurrentStreams: 8, StreamWindow: 1 << 12, Shared: shared})
		s := NewSession(fuzzRegistry(), lim, nil)
		start := clientStart()
		in := append(start[:len(start):len(start)], data...)
		cut := int(split) % (len(in) + 1)
		err := s.Feed(in[:cut])
		if err == nil {
			s.Serve(context.Background())
			err = s.Feed(in[cut:])
		}
		s.Serve(context.Background())
		if err != nil && !s.Done() {
			t.Fatalf("Feed failed (%v) but the session is not Done", err)
		}
		// Memory stays within the limits: what the streams hold or were
		// promised, and what was allocated for them.
		if b, max := s.Buffered(), int64(s.lim.ConnBufferBytes); b > max || b < 0 {
			t.Fatalf("the Session holds %d bytes; ConnBufferBytes is %d", b, max)
		}
		if u := shared.Used(); u > int64(s.lim.ConnBufferBytes)+64<<10 || u < 0 {
			t.Fatalf("%d bytes allocated for request bodies", u)
		}
		readAll(t, s.Output())
		s.Wrote(len(s.Output()))
		s.Release()
	})
}

// FuzzMessage sends one well-formed request whose gRPC message bytes (the
// 5-byte prefix included) are fuzzed. Every request must get exactly one
// answer: a trailer that ends the stream, or RST_STREAM.
func FuzzMessage(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 2, 10, 0})
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 9, 10})
	f.Add([]byte{0, 0, 0, 0, 1, 0xff})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		in := clientStart()
		in = append(in, request(enc, &hb, 1, "/enginetest.T/Echo", msg)...)
		s := NewSession(fuzzRegistry(), configured(Limits{MaxRecvMsgBytes: 1 << 16}), nil)
		if err := s.Feed(in); err != nil {
			t.Fatalf("well-formed frames refused: %v", err)
		}
		s.Serve(context.Background())
		if !readAll(t, s.Output())[1] {
			t.Fatalf("request %x got no final answer", msg)
		}
		if s.Open() != 0 {
			t.Fatalf("%d streams left open", s.Open())
		}
	})
}
