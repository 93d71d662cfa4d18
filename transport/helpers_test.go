package transport

import (
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/config"

	"google.golang.org/grpc"

	"github.com/electord/electord/election"
)

// maxMsg is the max-message-bytes a node runs with.
var maxMsg = config.Default().MaxMessageBytes

const waitFor = 5 * time.Second

type failure struct {
	m   election.Message
	err error
}

// fakeReceiver records what arrives. With autoReply it answers every
// Heartbeat as the leader of the heartbeat's term.
type fakeReceiver struct {
	self      election.NodeID
	autoReply bool

	mu      sync.Mutex
	err     error         // returned by Receive
	block   chan struct{} // when set, Receive waits for it to close
	entered chan struct{} // when set, Receive signals on it before blocking

	got    chan Inbound
	failed chan failure
}

func newFakeReceiver(self election.NodeID) *fakeReceiver {
	return &fakeReceiver{self: self, autoReply: true, got: make(chan Inbound, 4096), failed: make(chan failure, 4096)}
}

func (r *fakeReceiver) setErr(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func (r *fakeReceiver) Receive(in Inbound) error {
	r.mu.Lock()
	err, block, entered := r.err, r.block, r.entered
	r.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if block != nil {
		<-block
	}
	if err != nil {
		return err
	}
	r.got <- in
	if in.Reply != nil && r.autoReply {
		in.Reply <- election.Message{Type: election.MsgHeartbeatResp, From: r.self, To: in.Msg.From, Term: in.Msg.Term, Leader: r.self, Election: in.Msg.Election}
	}
	return nil
}

func (r *fakeReceiver) Failed(m election.Message, err error) {
	r.failed <- failure{m, err}
}

func (r *fakeReceiver) next(t *testing.T) Inbound {
	t.Helper()
	select {
	case in := <-r.got:
		return in
	case <-time.After(waitFor):
		t.Fatalf("node %d: no message arrived within %v", r.self, waitFor)
	}
	return Inbound{}
}

func (r *fakeReceiver) nextFailure(t *testing.T) failure {
	t.Helper()
	select {
	case f := <-r.failed:
		return f
	case <-time.After(waitFor):
		t.Fatalf("node %d: no failure reported within %v", r.self, waitFor)
	}
	return failure{}
}

func (r *fakeReceiver) noFailure(t *testing.T) {
	t.Helper()
	select {
	case f := <-r.failed:
		t.Fatalf("node %d: unexpected failure of %+v: %v", r.self, f.m, f.err)
	default:
	}
}

// startServer serves node id's PeerService on 127.0.0.1:0.
func startServer(t *testing.T, id election.NodeID, r Receiver, opts ...grpc.ServerOption) (string, *PeerService) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := NewPeerService(id, r)
	srv := NewGRPCServer(svc, maxMsg, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String(), svc
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// serveStoppable serves node id's PeerService on 127.0.0.1:0 until stop,
// which closes the listener and every connection and waits for Serve.
func serveStoppable(t *testing.T, id election.NodeID, r Receiver) (addr string, stop func()) {
	t.Helper()
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewGRPCServer(NewPeerService(id, r), maxMsg)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	return lis.Addr().String(), func() { srv.Stop(); <-done }
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// newGRPC returns a transport closed when the test ends. Unless cfg sets
// one, its send timeout is the tests' wait, not the default 500ms: no test
// fails because a busy machine (-race) took longer than that to deliver.
func newGRPC(t *testing.T, cfg GRPCConfig) *GRPC {
	t.Helper()
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = waitFor
	}
	tr, err := NewGRPC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// pairGRPC serves node 2 with srv and gives node 1 (its failures and
// replies going to cli) a GRPC transport to it, configured by cfg beyond
// Self and Receiver.
func pairGRPC(t *testing.T, srv *fakeReceiver, cfg GRPCConfig, opts ...grpc.ServerOption) (addr string, svc *PeerService, cli *fakeReceiver, tr *GRPC) {
	t.Helper()
	addr, svc = startServer(t, 2, srv, opts...)
	cli = newFakeReceiver(1)
	cfg.Self, cfg.Receiver = 1, cli
	tr = newGRPC(t, cfg)
	tr.SetPeer(2, addr)
	return addr, svc, cli, tr
}

// waitGoroutines waits until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(waitFor)
	for runtime.NumGoroutine() > n {
		select {
		case <-deadline:
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines still running, want <= %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sampleMessages has one message of every type from 1 to 2, with every
// field the wire carries set.
func sampleMessages(from, to election.NodeID) []election.Message {
	term := election.NextTerm(0, from)
	return []election.Message{
		{Type: election.MsgElection, From: from, To: to, Term: term, Initiator: from,
			Candidates: []election.Rank{{Priority: 3, ID: from}, {Priority: -2, ID: 7}},
			MaxTerm:    term - 1, FromRank: election.Rank{Priority: 3, ID: from},
			InitiatorRank: election.Rank{Priority: 3, ID: from}, Leader: 9},
		{Type: election.MsgAnswer, From: from, To: to, Term: term},
		{Type: election.MsgCoordinator, From: from, To: to, Term: term, Leader: from, Initiator: 5, Confirmed: true},
		{Type: election.MsgCoordinatorAck, From: from, To: to, Term: term},
		{Type: election.MsgHeartbeat, From: from, To: to, Term: term, Leader: to},
		{Type: election.MsgHeartbeatResp, From: from, To: to, Term: term, Leader: 4, Reject: true},
		{Type: election.MsgTimeoutNow, From: from, To: to, Term: term, Elect: true},
	}
}

// eventually waits until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitFor)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("%s: not within %v", what, waitFor)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
