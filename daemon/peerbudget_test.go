package daemon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// nodeConfig is config.Default() with set applied: what the peer servers of
// these tests are built from.
func nodeConfig(set func(*config.Config)) config.Config {
	c := config.Default()
	if set != nil {
		set(&c)
	}
	return c
}

// maxMsg is the default max-message-bytes.
var maxMsg = config.Default().MaxMessageBytes

// The least peer-max-buffered-bytes is one peer message of the default
// largest size.
func TestPeerBufferedBytesDefaults(t *testing.T) {
	if config.MinPeerMaxBufferedBytes != maxMsg {
		t.Fatalf("config.MinPeerMaxBufferedBytes %d, max-message-bytes %d", config.MinPeerMaxBufferedBytes, maxMsg)
	}
}

// rawPeer is a raw HTTP/2 client of a peer port: it writes the frames it is
// told to and reads the server's answers.
type rawPeer struct {
	t        *testing.T
	c        net.Conn
	fr       *http2.Framer
	enc      *hpack.Encoder
	hbuf     bytes.Buffer
	settings map[http2.SettingID]uint32 // the server's SETTINGS
	ended    map[uint32]string          // streams the server ended, and how
}

// dialRawPeer connects to addr and exchanges the preface and SETTINGS.
func dialRawPeer(t *testing.T, addr string) *rawPeer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &rawPeer{t: t, c: c, fr: http2.NewFramer(c, c), settings: map[http2.SettingID]uint32{}, ended: map[uint32]string{}}
	p.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	p.enc = hpack.NewEncoder(&p.hbuf)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := p.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			_ = sf.ForeachSetting(func(s http2.Setting) error { p.settings[s.ID] = s.Val; return nil })
			break
		}
	}
	if err := p.fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	return p
}

// open starts a call to the Peer service's Answer on stream id, with the
// extra header fields (name, value, ...), split over CONTINUATION frames
// where the block is larger than a frame.
func (p *rawPeer) open(id uint32, extra ...string) {
	p.t.Helper()
	p.hbuf.Reset()
	fields := append([]string{":method", "POST", ":scheme", "http", ":path", "/electord.v1.Peer/Answer", ":authority", "peer",
		"content-type", "application/grpc", "te", "trailers"}, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = p.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	block := p.hbuf.Bytes()
	const frame = 16 << 10
	first := block[:min(len(block), frame)]
	err := p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) <= frame})
	for rest := block[len(first):]; err == nil && len(rest) > 0; {
		k := min(len(rest), frame)
		err = p.fr.WriteContinuation(id, k == len(rest), rest[:k])
		rest = rest[k:]
	}
	if err != nil {
		p.t.Fatal(err)
	}
}

// claim opens stream id and sends the start of a message that claims 1 MiB
// (the peer port's limit): its 5-byte prefix and 1 KiB, without END_STREAM.
func (p *rawPeer) claim(id uint32) {
	p.t.Helper()
	p.open(id)
	b := make([]byte, 5+1<<10)
	binary.BigEndian.PutUint32(b[1:5], uint32(maxMsg))
	if err := p.fr.WriteData(id, false, b); err != nil {
		p.t.Fatal(err)
	}
}

// send opens stream id with the extra header fields and sends m whole.
func (p *rawPeer) send(id uint32, m election.Message, extra ...string) {
	p.t.Helper()
	x, err := transport.Encode(m)
	if err != nil {
		p.t.Fatal(err)
	}
	body, err := proto.Marshal(x)
	if err != nil {
		p.t.Fatal(err)
	}
	p.open(id, extra...)
	b := make([]byte, 5, 5+len(body))
	binary.BigEndian.PutUint32(b[1:5], uint32(len(body)))
	if err := p.fr.WriteData(id, true, append(b, body...)); err != nil {
		p.t.Fatal(err)
	}
}

// reset ends stream id from the client's side.
func (p *rawPeer) reset(id uint32) {
	p.t.Helper()
	if err := p.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
		p.t.Fatal(err)
	}
}

// answer reads until the server ended stream id and returns how:
// "status <code> <message>" for trailers, "RST_STREAM <code>" for a reset.
func (p *rawPeer) answer(id uint32) string {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for p.ended[id] == "" {
		f, err := p.fr.ReadFrame()
		if err != nil {
			p.t.Fatalf("waiting for the server to end stream %d: %v (ended so far: %v)", id, err, p.ended)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				code, msg := "", ""
				for _, hf := range f.Fields {
					switch hf.Name {
					case "grpc-status":
						code = hf.Value
					case "grpc-message":
						msg = hf.Value
					}
				}
				p.ended[f.StreamID] = "status " + code + " " + msg
			}
		case *http2.RSTStreamFrame:
			if p.ended[f.StreamID] == "" {
				p.ended[f.StreamID] = "RST_STREAM " + f.ErrCode.String()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = p.fr.WritePing(true, f.Data)
			}
		}
	}
	return p.ended[id]
}

// grpcPeerServer serves a grpc peer server built by buildPeerServer with cfg
// around svc, and returns its address.
func grpcPeerServer(t *testing.T, cfg config.Config, svc *transport.PeerService) string {
	t.Helper()
	cfg.PeerServer = "grpc"
	return servePeerServer(t, cfg, svc)
}

// servePeerServer serves the peer server buildPeerServer builds with cfg
// (cfg.PeerServer names it) around svc, and returns its address.
func servePeerServer(t *testing.T, cfg config.Config, svc *transport.PeerService) string {
	t.Helper()
	srv := buildPeerServer(peerServerInputs{Config: cfg, Service: svc, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
}

// grpcPeerClient returns a GRPC transport of node 1 that sends to node 2
// at addr (5 s a call), and the inbox that gets its failures; it is closed
// when the test ends.
func grpcPeerClient(t *testing.T, addr string) (*transport.GRPC, inbox) {
	t.Helper()
	cliIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
	tr, err := transport.NewGRPC(transport.GRPCConfig{Self: 1, Receiver: cliIn, SendTimeout: 5 * time.Second, MaxMessageBytes: maxMsg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	tr.SetPeer(2, addr)
	return tr, cliIn
}

// waitNoneInFlight waits up to 5 s for svc's streams in flight to be none.
func waitNoneInFlight(t *testing.T, svc *transport.PeerService, what string) {
	t.Helper()
	waitInFlight(t, svc, 0, what)
}

// waitInFlight waits up to 5 s for svc's streams in flight to be n.
func waitInFlight(t *testing.T, svc *transport.PeerService, n int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); svc.Stats().StreamsInFlight != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d streams in flight after 5 s, want %d", what, svc.Stats().StreamsInFlight, n)
		}
	}
}

// The grpc peer server bounds what all its connections buffer together
// (issue 11): with peer-max-buffered-bytes of 2 MiB, two streams that each
// claim a 1 MiB message and hold it unfinished take the whole budget; one
// connection holds at most a quarter of it (at least one stream), so the
// attacker takes it with two connections, and a second stream on either
// is refused naming its share. A stream from a third connection, or from a
// real peer, is refused at once with ResourceExhausted naming the key, and
// counted. The sender takes that refusal as a failed message, not as the
// peer being down. Once the attacker's streams end, a peer message goes
// through, and the freed slots serve new streams. Before, every stream was
// let in: the bound was max-conns x peer-max-streams windows of 1 MiB.
func TestGRPCPeerServerBufferBudget(t *testing.T) {
	srvIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
	svc := transport.NewPeerService(2, srvIn)
	addr := grpcPeerServer(t, nodeConfig(func(c *config.Config) { c.PeerMaxBufferedBytes = 2 << 20 }), svc)

	tr, cliIn := grpcPeerClient(t, addr)
	msg := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 5}
	// deliver sends msg until the server takes it (a refusal may come
	// while a freed slot is still being given back).
	deliver := func() {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			tr.Send(msg)
			select {
			case <-srvIn.got:
				return
			case err := <-cliIn.failed:
				t.Logf("refused, sending again: %v", err)
			case <-deadline:
				t.Fatal("the peer message was not delivered within 10 s")
			}
		}
	}
	refused := func(p *rawPeer, id uint32, why string) {
		t.Helper()
		got := p.answer(id)
		if !strings.HasPrefix(got, "status "+strconv.Itoa(int(codes.ResourceExhausted))+" ") ||
			!strings.Contains(got, "peer-max-buffered-bytes") || !strings.Contains(got, why) {
			t.Fatalf("stream %d: %q, want ResourceExhausted naming peer-max-buffered-bytes and %q", id, got, why)
		}
	}
	const full, share = "all that", "share"

	a, b, c := dialRawPeer(t, addr), dialRawPeer(t, addr), dialRawPeer(t, addr)
	a.claim(1)
	b.claim(1)
	waitInFlight(t, svc, 2, "the attacker's streams let in")
	a.claim(3)
	refused(a, 3, share)
	c.claim(1)
	refused(c, 1, full)
	if a.ended[1] != "" || b.ended[1] != "" {
		t.Fatalf("streams within the budget were ended: %v, %v", a.ended, b.ended)
	}
	if st := svc.Stats(); st.RejectedBudget != 2 || st.StreamsInFlight != 2 {
		t.Fatalf("stats %+v, want 2 refused and 2 in flight", st)
	}

	// A real peer on another connection is refused too, and its sender
	// does not take the refusal for a dead peer.
	tr.Send(msg)
	select {
	case err := <-cliIn.failed:
		if grpcstatus.Code(err) != codes.ResourceExhausted || errors.Is(err, transport.ErrPeerDown) {
			t.Fatalf("send while the budget is taken: %v, want ResourceExhausted and not ErrPeerDown", err)
		}
	case in := <-srvIn.got:
		t.Fatalf("delivered while the budget was taken: %+v", in.Msg)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the peer message")
	}

	// The attacker's streams end: the peer's message goes through.
	a.reset(1)
	b.reset(1)
	waitNoneInFlight(t, svc, "the reset streams' slots given back")
	deliver()

	// The freed slots serve new streams, and no more than two.
	waitNoneInFlight(t, svc, "the peer call's slot given back")
	a.claim(5)
	b.claim(3)
	waitInFlight(t, svc, 2, "the attacker's new streams let in")
	c.claim(3)
	refused(c, 3, full)
	if a.ended[5] != "" || b.ended[3] != "" {
		t.Fatalf("streams in the freed slots were ended: %v, %v", a.ended, b.ended)
	}
	// Connections that go away give their slots back.
	a.c.Close()
	b.c.Close()
	waitNoneInFlight(t, svc, "the closed connections' slots given back")
	deliver()
	if st := svc.Stats(); st.RejectedBudget < 4 {
		t.Fatalf("stats %+v, want at least 4 refused", st)
	}
}

// A client that opens streams and sends only their HEADERS (no DATA, no
// grpc-timeout) on two connections, 16 each (peer-max-streams), takes at
// most a quarter of the default budget (32 streams) per connection: the
// streams beyond are refused naming the connection's share, and a real
// peer's messages are delivered at once while the attacker holds its
// streams. Before, the 32 streams took the whole budget and kept it for as
// long as the connections stayed (found in review): every peer message of
// the node was refused. (Each stream also ends at
// transport.PeerStreamDeadline: TestStreamBudgetDeadline.)
func TestGRPCPeerServerHeadersOnlyStreams(t *testing.T) {
	srvIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
	svc := transport.NewPeerService(2, srvIn)
	addr := grpcPeerServer(t, config.Default(), svc)
	var conns []*rawPeer
	for range 2 {
		p := dialRawPeer(t, addr)
		for i := range uint32(config.DefaultPeerMaxStreams) {
			p.open(1 + 2*i)
		}
		conns = append(conns, p)
	}
	// Every stream let in or refused.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := svc.Stats()
		if st.StreamsInFlight+int64(st.RejectedBudget) == 2*config.DefaultPeerMaxStreams {
			t.Logf("stats %+v", st)
			if st.StreamsInFlight > 2*config.DefaultPeerMaxBufferedBytes/int64(maxMsg)/4 {
				t.Errorf("two connections hold %d of the budget's %d streams, more than a quarter each",
					st.StreamsInFlight, config.DefaultPeerMaxBufferedBytes/maxMsg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: not every stream of the attacker let in or refused within 5 s", st)
		}
	}
	tr, cliIn := grpcPeerClient(t, addr)
	for i := range 3 {
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 5})
		select {
		case <-srvIn.got:
		case err := <-cliIn.failed:
			t.Fatalf("message %d refused while a headers-only client holds streams: %v", i, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d neither delivered nor refused within 5 s", i)
		}
	}
	last := uint32(1 + 2*(config.DefaultPeerMaxStreams-1))
	for _, p := range conns {
		if got := p.answer(last); !strings.Contains(got, "share") {
			t.Errorf("the last stream of a connection: %q, want refused naming the connection's share", got)
		}
		if p.ended[1] != "" {
			t.Errorf("the attacker's first stream ended early: %q", p.ended[1])
		}
	}
}

// The grpc peer server refuses a header list over max-header-list-bytes
// (16 KiB by default) and says so in its SETTINGS, as the lf pool does; grpc-go's own
// default is 16 MiB. A header list under the limit is served.
func TestGRPCPeerServerHeaderListLimit(t *testing.T) {
	srvIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
	addr := grpcPeerServer(t, config.Default(), transport.NewPeerService(2, srvIn))
	p := dialRawPeer(t, addr)
	if v, ok := p.settings[http2.SettingMaxHeaderListSize]; !ok || v != uint32(config.DefaultMaxHeaderListBytes) {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE: %d (sent: %v), want %d", v, ok, config.DefaultMaxHeaderListBytes)
	}
	m := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 5}
	// Two fields of 10 KiB: a list over the limit of fields under it (a
	// single field over it ends the connection: hpack's string limit).
	p.send(1, m, "x-pad", strings.Repeat("a", 10<<10), "x-pad-2", strings.Repeat("b", 10<<10))
	if got := p.answer(1); got == "status 0 " {
		t.Errorf("a 20 KiB header list was served: %q", got)
	} else {
		t.Logf("a 20 KiB header list: %s", got)
	}
	p.send(3, m, "x-pad", strings.Repeat("a", 8<<10))
	if got := p.answer(3); got != "status 0 " {
		t.Errorf("an 8 KiB header list: %q, want OK", got)
	}
}
