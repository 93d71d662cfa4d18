package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
)

func TestRefusedOrReset(t *testing.T) {
	opErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused dial", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7071: connect: connection refused"`), true},
		{"reset read", status.Error(codes.Unavailable, "error reading from server: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), true},
		{"closed without goaway", status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{"errno in the chain", fmt.Errorf("send: %w", opErr(syscall.ECONNREFUSED)), true},
		{"reset errno in the chain", opErr(syscall.ECONNRESET), true},
		{"graceful goaway", status.Error(codes.Unavailable, `the connection is draining due to an error: received prior goaway: code: NO_ERROR, debug data: "graceful_stop"`), false},
		{"goaway then refused", status.Error(codes.Unavailable, "closing transport due to: GOAWAY; connection refused"), false},
		{"deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false},
		{"deadline mentioning refused", status.Error(codes.DeadlineExceeded, "connection refused"), false},
		{"canceled", status.Error(codes.Canceled, "context canceled"), false},
		{"overloaded peer", status.Error(codes.Unavailable, "transport: node inbox is full"), false},
		{"not serving", status.Error(codes.Unavailable, "transport: node is not serving peers"), false},
		{"timed out dial", status.Error(codes.Unavailable, "dial tcp 10.0.0.9:7071: i/o timeout"), false},
		{"no route", opErr(syscall.EHOSTUNREACH), false},
		{"plain error", errors.New("connection refused?"), false},
		{"eof", io.EOF, false},
	} {
		if got := refusedOrReset(c.err); got != c.want {
			t.Errorf("%s: refusedOrReset(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestProbeRefused(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if probeRefused(lis.Addr().String(), time.Second) {
		t.Error("a listening address was probed as refused")
	}
	dead := deadAddr(t)
	if !probeRefused(dead, time.Second) {
		t.Error("a closed port was not probed as refused")
	}
	for _, addr := range []string{"passthrough:///" + dead, "unix:/tmp/x.sock", "no-port", dead} {
		timeout := time.Second
		if addr == dead {
			timeout = -1 // probing disabled
		}
		if probeRefused(addr, timeout) {
			t.Errorf("probeRefused(%q, %v) = true, want false (never probed)", addr, timeout)
		}
	}
}

// probeDropped finds a listener that closes some time after the drop, up
// to its last probe, and reports a listener that stays as alive.
func TestProbeDroppedFindsALateClose(t *testing.T) {
	for _, after := range []time.Duration{0, 3 * time.Millisecond, 30 * time.Millisecond} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(after)
			lis.Close()
		}()
		if !probeDropped(lis.Addr().String(), time.Second) {
			t.Errorf("a listener closed %v after the drop: not found gone", after)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if probeDropped(lis.Addr().String(), time.Second) {
		t.Error("a listener that stayed was found gone")
	}
}

// A heartbeat to a port nobody listens on fails as ErrPeerDown; any other
// message to it fails as before, and so does a heartbeat with probing off.
func TestGRPCHeartbeatToClosedPortIsPeerDown(t *testing.T) {
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli, SendTimeout: time.Hour})
	tr.SetPeer(2, deadAddr(t))
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	if f := cli.nextFailure(t); !errors.Is(f.err, ErrPeerDown) {
		t.Errorf("heartbeat to a closed port failed with %v, want ErrPeerDown", f.err)
	}
	tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	if f := cli.nextFailure(t); errors.Is(f.err, ErrPeerDown) {
		t.Errorf("an Answer's failure is %v: only heartbeats are probed", f.err)
	}
	if got := tr.Stats().PeersDown; got != 1 {
		t.Errorf("PeersDown = %d, want 1", got)
	}

	off := newFakeReceiver(1)
	tr2 := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: off, SendTimeout: time.Hour, ProbeTimeout: -1})
	tr2.SetPeer(2, deadAddr(t))
	tr2.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	if f := off.nextFailure(t); errors.Is(f.err, ErrPeerDown) || status.Code(f.err) != codes.Unavailable {
		t.Errorf("with probing off the heartbeat failed with %v, want plain Unavailable", f.err)
	}
}

// A live peer that refuses a heartbeat (overloaded, not serving) or does
// not answer in time is not down.
func TestGRPCLivePeerIsNotDown(t *testing.T) {
	srv := newFakeReceiver(2)
	srv.setErr(ErrNotServing)
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	if f := cli.nextFailure(t); errors.Is(f.err, ErrPeerDown) {
		t.Errorf("a live peer not serving failed with %v", f.err)
	}
	srv.setErr(nil)
	srv.autoReply = false
	_, _, cli2, tr2 := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg, SendTimeout: 50 * time.Millisecond})
	tr2.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	if f := cli2.nextFailure(t); errors.Is(f.err, ErrPeerDown) || status.Code(f.err) != codes.DeadlineExceeded {
		t.Errorf("an unanswered heartbeat failed with %v, want DeadlineExceeded", f.err)
	}
}

// stoppablePeer is node 1's transport with peer 2 served by a server that
// stop stops as a dying process would.
func stoppablePeer(t *testing.T) (srvRecv *fakeReceiver, stop func(), cli *fakeReceiver, tr *GRPC) {
	srvRecv = newFakeReceiver(2)
	addr, stop := serveStoppable(t, 2, srvRecv)
	cli = newFakeReceiver(1)
	tr = newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli})
	tr.SetPeer(2, addr)
	return srvRecv, stop, cli, tr
}

// When a peer's process dies, the connection drops: the transport probes
// at once and reports ErrPeerDown without waiting for the next message.
func TestGRPCDroppedConnectionReportsPeerDown(t *testing.T) {
	srvRecv, stop, cli, tr := stoppablePeer(t)
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	srvRecv.next(t)
	cli.next(t)
	stop() // the listener and the connection close, as when a process dies
	f := cli.nextFailure(t)
	if !errors.Is(f.err, ErrPeerDown) || f.m.To != 2 || f.m.Type != election.MsgHeartbeat {
		t.Fatalf("after the peer's server stopped: failure %+v, %v; want a heartbeat to 2 failing with ErrPeerDown", f.m, f.err)
	}
}

// A live peer that sends GOAWAY (here: its connections have a maximum
// age) and still listens is not down.
func TestGRPCGoAwayFromLivePeerIsNotDown(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	addr, _ := startServer(t, 2, srvRecv, grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: 10 * time.Millisecond}))
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli})
	tr.SetPeer(2, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	for ctx.Err() == nil {
		tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for {
		select {
		case f := <-cli.failed:
			if errors.Is(f.err, ErrPeerDown) {
				t.Fatalf("a live peer's GOAWAY was reported as %v", f.err)
			}
		default:
			return
		}
	}
}

// Connect opens the connection before anything is sent, and the watcher
// follows it: a follower that connects to its new leader at once sees the
// leader's death as a dropped connection (issue 10: the first crash after a
// leadership change waited for the next heartbeat, about 200 ms).
func TestGRPCConnectWatchesBeforeTheFirstSend(t *testing.T) {
	_, stop, cli, tr := stoppablePeer(t)
	var c Connector = tr
	c.Connect(2)
	l := tr.q.linkOf(2).(*grpcLink)
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	if conn == nil {
		t.Fatal("Connect made no connection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("the connection Connect opened is %v after 5 s, want Ready", s)
		}
	}
	stop() // the listener and the connection close, as when a process dies
	f := cli.nextFailure(t)
	if !errors.Is(f.err, ErrPeerDown) || f.m.To != 2 {
		t.Fatalf("after the peer's server stopped: failure %+v, %v; want ErrPeerDown for 2, with nothing ever sent", f.m, f.err)
	}
	tr.Connect(9) // an unknown peer: nothing happens
}

// A Batch that carries Heartbeats and fails on a closed port fails its
// Heartbeats with ErrPeerDown, as their own call would, and its one-way
// messages as they were failed before (not down: only heartbeats are
// probed, so a refused Coordinator never deposes anyone).
func TestGRPCBatchToClosedPortIsPeerDownForItsHeartbeats(t *testing.T) {
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli, SendTimeout: time.Hour})
	tr.SetPeer(2, deadAddr(t))
	l := tr.q.linkOf(2).(*grpcLink)
	term := election.NextTerm(0, 1)
	ms := append([]election.Message{{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "jobs-x"}}, namedHeartbeats(2)...)
	l.sendBatch(context.Background(), ms)
	for range ms {
		f := cli.nextFailure(t)
		if down := errors.Is(f.err, ErrPeerDown); down != (f.m.Type == election.MsgHeartbeat) {
			t.Errorf("%v failed with %v (ErrPeerDown %v): want it for the heartbeats only", f.m.Type, f.err, down)
		}
	}
}
