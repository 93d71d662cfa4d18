package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
)

// stallProxy forwards TCP connections to a backend until stall is called;
// from then on the connections it had carry nothing more, either way, and
// stay open, as a connection cut by a network fault does while TCP backs
// off its retransmissions; connections made after stall are forwarded.
type stallProxy struct {
	lis     net.Listener
	backend string

	mu      sync.Mutex
	conns   []*stallConn
	accepts int
	done    chan struct{}
	wg      sync.WaitGroup
}

// stallConn is one proxied connection; stalled stops its forwarding.
type stallConn struct {
	mu      sync.Mutex
	stalled bool
}

func (c *stallConn) isStalled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stalled
}

func newStallProxy(t *testing.T, backend string) *stallProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{lis: lis, backend: backend, done: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		close(p.done)
		lis.Close()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.lis.Addr().String() }

// stall stops every connection open now.
func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		c.stalled = true
		c.mu.Unlock()
	}
}

// connections is how many connections the proxy accepted.
func (p *stallProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

func (p *stallProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			in.Close()
			continue
		}
		c := &stallConn{}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.accepts++
		p.mu.Unlock()
		p.wg.Add(3)
		go func() { defer p.wg.Done(); p.pipe(c, out, in) }()
		go func() { defer p.wg.Done(); p.pipe(c, in, out) }()
		go func() {
			defer p.wg.Done()
			<-p.done
			in.Close()
			out.Close()
		}()
	}
}

// pipe copies from src to dst until either fails, discarding what it reads
// once c is stalled (the peer never sees it, and never answers it).
func (p *stallProxy) pipe(c *stallConn, dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.isStalled() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A connection on which an RPC went unanswered for its whole deadline is
// closed, and the next message goes over a new one: after a network cut
// heals, the old connection may carry nothing for seconds (TCP backs off
// its retransmissions), while a new one connects in a round trip. Without
// the redial every message after the stall timed out on the old
// connection.
func TestSilentConnectionIsReplaced(t *testing.T) {
	srv := newFakeReceiver(2)
	addr, _ := startServer(t, 2, srv)
	p := newStallProxy(t, addr)
	cli := newFakeReceiver(1)
	const timeout = 300 * time.Millisecond
	tr := newGRPC(t, GRPCConfig{Self: 1, Receiver: cli, MaxMessageBytes: maxMsg, SendTimeout: timeout})
	tr.SetPeer(2, p.addr())
	term := election.NextTerm(0, 1)
	msg := election.Message{Type: election.MsgElection, From: 1, To: 2, Term: term, Initiator: 1}

	tr.Send(msg)
	srv.next(t)
	if n := p.connections(); n != 1 {
		t.Fatalf("%d connections before the stall, want 1", n)
	}

	p.stall()
	tr.Send(msg)
	if f := cli.nextFailure(t); status.Code(f.err) != codes.DeadlineExceeded {
		t.Fatalf("message on the stalled connection: %v, want DeadlineExceeded", f.err)
	}

	// The link is healed (new connections are forwarded); the old
	// connection stays stalled. A message sent while the failure above
	// is still being reported may fail as queued behind it
	// (ErrPeerSilent): send again.
	deadline := time.Now().Add(waitFor)
	for {
		tr.Send(msg)
		select {
		case <-srv.got:
			return
		case f := <-cli.failed:
			if !errors.Is(f.err, ErrPeerSilent) {
				t.Fatalf("message after the stall: %v, want it delivered on a new connection", f.err)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("message after the stall: neither delivered nor failed within %v", waitFor)
		}
	}
}

// timeoutErr is a dial's timeout, as net reports one.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "dial tcp: i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// A connection whose dial failed otherwise than by a refusal (a dial that
// timed out, as while the peer is cut off) is closed too: grpc-go would keep
// it in its reconnect back-off and fail the first messages after the heal
// at once. Without the redial the message sent right after the heal failed
// with Unavailable on the connection still backing off.
func TestTimedOutDialIsReplaced(t *testing.T) {
	srv := newFakeReceiver(2)
	addr, _ := startServer(t, 2, srv)
	var mu sync.Mutex
	cut := true
	dialer := func(ctx context.Context, target string) (net.Conn, error) {
		mu.Lock()
		c := cut
		mu.Unlock()
		if c {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	}
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{Self: 1, Receiver: cli, MaxMessageBytes: maxMsg, ReconnectBackoff: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dialer)}})
	tr.SetPeer(2, addr)
	msg := election.Message{Type: election.MsgElection, From: 1, To: 2, Term: election.NextTerm(0, 1), Initiator: 1}

	tr.Send(msg)
	if f := cli.nextFailure(t); status.Code(f.err) != codes.Unavailable {
		t.Fatalf("message while the dial times out: %v, want Unavailable", f.err)
	}
	mu.Lock()
	cut = false
	mu.Unlock()
	tr.Send(msg)
	select {
	case <-srv.got:
	case f := <-cli.failed:
		t.Fatalf("message after the heal: %v, want it delivered on a new connection", f.err)
	case <-time.After(waitFor):
		t.Fatalf("message after the heal: neither delivered nor failed within %v", waitFor)
	}
}
