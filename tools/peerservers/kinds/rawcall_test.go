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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// rawClient makes gRPC calls frame by frame, to send what the grpc-go
// client never does (CONTINUATION, padding, tiny frames, tiny windows).
type rawClient struct {
	t  *testing.T
	c  net.Conn
	fr *http2.Framer
}

func newRawClient(t *testing.T, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	c := rawDial(t, addr)
	c.SetDeadline(time.Now().Add(eventually))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	// We advertise no SETTINGS_MAX_FRAME_SIZE, so 16 KiB is the most the
	// server may send; the Framer rejects anything larger.
	fr.SetMaxReadFrameSize(16 << 10)
	if err := fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return &rawClient{t: t, c: c, fr: fr}
}

// headerBlock encodes the request headers of a call to method; extra
// fields replace the defaults of the same name.
func headerBlock(t *testing.T, method string, extra ...hpack.HeaderField) []byte {
	t.Helper()
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: "lftest"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	}
	for _, e := range extra {
		replaced := false
		for i := range fields {
			if fields[i].Name == e.Name {
				fields[i].Value, replaced = e.Value, true
			}
		}
		if !replaced {
			fields = append(fields, e)
		}
	}
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// grpcFrame is a length-prefixed gRPC message holding a BytesValue.
func grpcFrame(t *testing.T, payload []byte) []byte {
	t.Helper()
	m, err := proto.Marshal(wrapperspb.Bytes(payload))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5, 5+len(m))
	binary.BigEndian.PutUint32(out[1:], uint32(len(m)))
	return append(out, m...)
}

// rawResponse is what came back on one stream.
type rawResponse struct {
	headers, trailers map[string]string
	data              []byte
}

// flowWatch checks the server's DATA against the windows the client
// granted, and grants more as a receiver would.
type flowWatch struct {
	streamWin, connWin int64 // remaining
	chunk              int64 // what one WINDOW_UPDATE grants
}

// readResponses reads until every stream in want has ended, answering
// SETTINGS and PING, and failing on RST_STREAM or GOAWAY.
func (rc *rawClient) readResponses(flow *flowWatch, want ...uint32) map[uint32]*rawResponse {
	t := rc.t
	t.Helper()
	out := map[uint32]*rawResponse{}
	open := map[uint32]bool{}
	for _, id := range want {
		out[id] = &rawResponse{}
		open[id] = true
	}
	for len(open) > 0 {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading responses (streams %v still open): %v", open, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := rc.fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := rc.fr.WritePing(true, f.Data); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v %q while streams %v were open", f.ErrCode, f.DebugData(), open)
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
		case *http2.MetaHeadersFrame:
			r, ok := out[f.StreamID]
			if !ok || !open[f.StreamID] {
				t.Fatalf("HEADERS on unexpected stream %d", f.StreamID)
			}
			m := map[string]string{}
			for _, hf := range f.Fields {
				m[hf.Name] = hf.Value
			}
			if r.headers == nil && !f.StreamEnded() {
				r.headers = m
			} else {
				r.trailers = m
			}
			if f.StreamEnded() {
				delete(open, f.StreamID)
			}
		case *http2.DataFrame:
			r, ok := out[f.StreamID]
			if !ok || !open[f.StreamID] {
				t.Fatalf("DATA on unexpected stream %d", f.StreamID)
			}
			r.data = append(r.data, f.Data()...)
			if f.StreamEnded() {
				t.Fatalf("stream %d ended with DATA, without trailers", f.StreamID)
			}
			if flow != nil {
				n := int64(f.Header().Length)
				flow.streamWin -= n
				flow.connWin -= n
				if flow.streamWin < 0 || flow.connWin < 0 {
					t.Fatalf("server overran the flow-control window: stream %d, connection %d after a %d-byte DATA", flow.streamWin, flow.connWin, n)
				}
				if 2*flow.streamWin < flow.chunk {
					flow.streamWin += flow.chunk
					if err := rc.fr.WriteWindowUpdate(f.StreamID, uint32(flow.chunk)); err != nil {
						t.Fatal(err)
					}
				}
				if 2*flow.connWin < flow.chunk {
					flow.connWin += flow.chunk
					if err := rc.fr.WriteWindowUpdate(0, uint32(flow.chunk)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	return out
}

// checkEcho checks that r is a successful Echo reply of payload.
func (r *rawResponse) checkEcho(t *testing.T, payload []byte) {
	t.Helper()
	if r.headers == nil {
		t.Fatalf("no response headers (trailers-only: %v)", r.trailers)
	}
	if got := r.headers[":status"]; got != "200" {
		t.Errorf(":status %q, want 200", got)
	}
	if got := r.headers["content-type"]; !strings.HasPrefix(got, "application/grpc") {
		t.Errorf("content-type %q, want application/grpc...", got)
	}
	if got := r.trailers["grpc-status"]; got != "0" {
		t.Fatalf("grpc-status %q (grpc-message %q), want 0", got, r.trailers["grpc-message"])
	}
	if len(r.data) < 5 {
		t.Fatalf("response body is %d bytes, want a length-prefixed message", len(r.data))
	}
	if r.data[0] != 0 {
		t.Fatalf("response message compressed flag %d, want 0", r.data[0])
	}
	n := binary.BigEndian.Uint32(r.data[1:5])
	if int(n) != len(r.data)-5 {
		t.Fatalf("response message prefix says %d bytes, body holds %d", n, len(r.data)-5)
	}
	var got wrapperspb.BytesValue
	if err := proto.Unmarshal(r.data[5:], &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.GetValue(), payload) {
		t.Fatal((&mismatchError{want: payload, got: got.GetValue()}).Error())
	}
}

func TestRawCallFraming(t *testing.T) {
	payload := pattern(300, 3)
	cases := []struct {
		name string
		send func(t *testing.T, fr *http2.Framer)
	}{
		{"plain", func(t *testing.T, fr *http2.Framer) {
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
			must(t, fr.WriteData(1, true, grpcFrame(t, payload)))
		}},
		{"CONTINUATION frames", func(t *testing.T, fr *http2.Framer) {
			hb := headerBlock(t, echo.MethodEcho, hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", 100)})
			a, b := len(hb)/3, 2*len(hb)/3
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb[:a]}))
			must(t, fr.WriteContinuation(1, false, hb[a:b]))
			must(t, fr.WriteContinuation(1, true, hb[b:]))
			must(t, fr.WriteData(1, true, grpcFrame(t, payload)))
		}},
		{"padding and priority", func(t *testing.T, fr *http2.Framer) {
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true,
				PadLength: 17, Priority: http2.PriorityParam{StreamDep: 0, Weight: 200}}))
			msg := grpcFrame(t, payload)
			must(t, fr.WriteDataPadded(1, false, msg[:100], make([]byte, 33)))
			must(t, fr.WriteDataPadded(1, true, msg[100:], make([]byte, 255)))
		}},
		{"one-byte DATA frames and an empty END_STREAM", func(t *testing.T, fr *http2.Framer) {
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
			for _, b := range grpcFrame(t, payload) {
				must(t, fr.WriteData(1, false, []byte{b}))
			}
			must(t, fr.WriteData(1, true, nil))
		}},
		{"application/grpc+proto and grpc-timeout", func(t *testing.T, fr *http2.Framer) {
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: headerBlock(t, echo.MethodEcho,
				hpack.HeaderField{Name: "content-type", Value: "application/grpc+proto"},
				hpack.HeaderField{Name: "grpc-timeout", Value: "5S"},
				hpack.HeaderField{Name: "user-agent", Value: "lftest-raw/1"})}))
			must(t, fr.WriteData(1, true, grpcFrame(t, payload)))
		}},
		{"PRIORITY and unknown frames between", func(t *testing.T, fr *http2.Framer) {
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
			must(t, fr.WritePriority(1, http2.PriorityParam{StreamDep: 0, Weight: 10}))
			must(t, fr.WriteRawFrame(0xfa, 0, 1, []byte("ignore me")))
			must(t, fr.WriteData(1, true, grpcFrame(t, payload)))
		}},
	}
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rc := newRawClient(t, s.addr)
				c.send(t, rc.fr)
				rc.readResponses(nil, 1)[1].checkEcho(t, payload)
			})
		}
		t.Run("interleaved streams and a reset one", func(t *testing.T) {
			rc := newRawClient(t, s.addr)
			fr := rc.fr
			p3, p5 := pattern(20000, 5), pattern(10, 6)
			m3 := grpcFrame(t, p3)
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
			must(t, fr.WriteData(3, false, m3[:7000]))
			must(t, fr.WriteData(1, false, grpcFrame(t, payload)[:50])) // never finished
			must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
			must(t, fr.WriteData(5, true, grpcFrame(t, p5)))
			must(t, fr.WriteRSTStream(1, http2.ErrCodeCancel))
			must(t, fr.WriteData(3, true, m3[7000:]))
			got := rc.readResponses(nil, 3, 5)
			got[3].checkEcho(t, p3)
			got[5].checkEcho(t, p5)
		})
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRawFlowControl gives the server tiny windows for its reply and checks
// it never sends more than granted, and still delivers the whole reply.
func TestRawFlowControl(t *testing.T) {
	cases := []struct {
		name    string
		initial uint32 // SETTINGS_INITIAL_WINDOW_SIZE
		size    int    // payload
		flow    flowWatch
	}{
		{"16-byte stream window", 16, 1000, flowWatch{streamWin: 16, connWin: 65535, chunk: 16}},
		{"connection window", 1 << 20, 200 << 10, flowWatch{streamWin: 1 << 20, connWin: 65535, chunk: 20000}},
		{"zero stream window", 0, 100, flowWatch{streamWin: 0, connWin: 65535, chunk: 1}},
	}
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rc := newRawClient(t, s.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: c.initial})
				payload := pattern(c.size, 11)
				must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodEcho), EndHeaders: true}))
				// The request fits in the server's initial windows (64 KiB)
				// except in the connection case, which sends it in pieces
				// as the server grants.
				msg := grpcFrame(t, payload)
				if len(msg) > 60000 {
					rc.sendFlowControlled(1, msg)
				} else {
					must(t, rc.fr.WriteData(1, true, msg))
				}
				flow := c.flow
				if flow.streamWin == 0 {
					// Nothing may come until we grant; grant one byte.
					must(t, rc.fr.WriteWindowUpdate(1, 1))
					flow.streamWin = 1
				}
				rc.readResponses(&flow, 1)[1].checkEcho(t, payload)
			})
		}
	})
}

// sendFlowControlled sends msg on stream as DATA within the server's
// windows, reading the server's WINDOW_UPDATEs as needed.
func (rc *rawClient) sendFlowControlled(stream uint32, msg []byte) {
	t := rc.t
	t.Helper()
	// The server's preface SETTINGS sets the window of our streams.
	streamWin, connWin := int64(65535), int64(65535)
	for done := false; !done; {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for the server's SETTINGS: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				streamWin = int64(v)
			}
			must(t, rc.fr.WriteSettingsAck())
			done = true
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connWin += int64(f.Increment)
			}
		default:
			t.Fatalf("server sent %v before its SETTINGS", f.Header())
		}
	}
	for len(msg) > 0 {
		n := min(int64(len(msg)), streamWin, connWin, 16<<10)
		if n > 0 {
			must(t, rc.fr.WriteData(stream, int(n) == len(msg), msg[:n]))
			msg = msg[n:]
			streamWin -= n
			connWin -= n
			continue
		}
		f, err := rc.fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for the server's WINDOW_UPDATE: %v", err)
		}
		switch f := f.(type) {
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connWin += int64(f.Increment)
			} else if f.StreamID == stream {
				streamWin += int64(f.Increment)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				must(t, rc.fr.WritePing(true, f.Data))
			}
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			t.Fatalf("server sent %v while we sent the request", f.Header())
		}
	}
}

// TestRawGoAway watches GracefulStop on the wire: the server sends
// GOAWAY(NO_ERROR) naming a stream at or past the one in flight, answers
// that stream, then closes the connection.
func TestRawGoAway(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		rc := newRawClient(t, s.addr)
		m, err := proto.Marshal(durationpb.New(500 * time.Millisecond))
		must(t, err)
		msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(m)))
		must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(t, echo.MethodSleep), EndHeaders: true}))
		must(t, rc.fr.WriteData(1, true, append(msg, m...)))
		waitFor(t, eventually, "the Sleep call to reach its handler", func() bool { return s.echo.Sleeping() == 1 })

		stopped := make(chan struct{})
		go func() { s.srv.GracefulStop(); close(stopped) }()

		var goaways []*http2.GoAwayFrame
		status := "" // grpc-status of stream 1
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the server did not close the connection (GOAWAYs seen: %d, stream 1 status %q)", len(goaways), status)
				}
				break // the server closed the connection
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					must(t, rc.fr.WriteSettingsAck())
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					must(t, rc.fr.WritePing(true, f.Data))
				}
			case *http2.GoAwayFrame:
				goaways = append(goaways, f)
			case *http2.RSTStreamFrame:
				t.Errorf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					for _, hf := range f.Fields {
						if hf.Name == "grpc-status" {
							status = hf.Value
						}
					}
					// perconn's goroutine holds the connection while the
					// handler runs and sends its GOAWAY after the answer;
					// lf queues it ahead of the answer.
					if len(goaways) == 0 && kind != KindPerConn {
						t.Errorf("stream %d (a 500 ms call, GracefulStop called while it ran) answered before any GOAWAY was sent", f.StreamID)
					}
				}
			}
		}
		if len(goaways) == 0 {
			t.Fatal("the connection ended without a GOAWAY")
		}
		for _, g := range goaways {
			if g.ErrCode != http2.ErrCodeNo {
				t.Errorf("GOAWAY %v, want NO_ERROR", g.ErrCode)
			}
		}
		if last := goaways[len(goaways)-1].LastStreamID; last < 1 {
			t.Errorf("final GOAWAY names stream %d, want >= 1 (stream 1 was accepted)", last)
		}
		if status != "0" {
			t.Errorf("in-flight stream 1 ended with grpc-status %q, want 0", status)
		}
		select {
		case <-stopped:
		case <-time.After(eventually):
			t.Fatal("GracefulStop did not return after the connection closed")
		}
	})
}
