package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// cluster starts n fake nodes, each with its api server, and returns a
// client of each.
func cluster(t *testing.T, n int) (*apitest.Cluster, []*apitest.Server, []electordv1.ElectorClient) {
	t.Helper()
	c := apitest.NewCluster(n)
	srvs, err := c.ServeAll()
	if err != nil {
		t.Fatal(err)
	}
	var clients []electordv1.ElectorClient
	for _, s := range srvs {
		t.Cleanup(s.Stop)
		clients = append(clients, dial(t, s.Addr))
	}
	return c, srvs, clients
}

func dial(t *testing.T, addr string) electordv1.ElectorClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return electordv1.NewElectorClient(conn)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err error, code codes.Code, msgPart string) {
	t.Helper()
	st := grpcstatus.Convert(err)
	if err == nil || st.Code() != code || !strings.Contains(st.Message(), msgPart) {
		t.Fatalf("error = %v; want code %v with %q", err, code, msgPart)
	}
}

func TestGetLeaderStatusMembers(t *testing.T) {
	c, srvs, cl := cluster(t, 3)
	ctx := ctxT(t)

	li, err := cl[0].GetLeader(ctx, &electordv1.GetLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if li.Id != 0 || li.State != node.StateElecting || li.SinceUnixNano != 0 {
		t.Fatalf("no leader yet, got %v", li)
	}

	c.Elect(3)
	li, err = cl[0].GetLeader(ctx, &electordv1.GetLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &electordv1.LeaderInfo{Id: 3, Name: "node-3", Address: srvs[2].Addr, Term: uint64(election.NextTerm(0, 3)),
		SinceUnixNano: apitest.Since0.Add(time.Second).UnixNano(), Self: false, State: node.StateFollower}
	if li.String() != want.String() {
		t.Fatalf("GetLeader = %v\nwant %v", li, want)
	}
	li, _ = cl[2].GetLeader(ctx, &electordv1.GetLeaderRequest{})
	if !li.Self || li.State != node.StateLeader {
		t.Fatalf("leader's own view = %v", li)
	}

	st, err := cl[1].Status(ctx, &electordv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.SelfId != 2 || st.Algorithm != "bully" || st.Leader.Id != 3 || len(st.Members) != 3 {
		t.Fatalf("Status = %v", st)
	}
	m := st.Members[2]
	if m.Id != 3 || m.Name != "node-3" || m.ApiAddress != srvs[2].Addr || !m.Alive || m.Role != "leader" ||
		m.Term != li.Term || m.Algorithm != "bully" || m.Priority != 3 || m.PeerAddress == "" {
		t.Fatalf("member 3 = %v", m)
	}
	ms, err := cl[1].Members(ctx, &electordv1.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.Members) != 3 || ms.Members[0].Role != "follower" {
		t.Fatalf("Members = %v", ms)
	}
}

// recv reads one event with a deadline.
func recv(t *testing.T, s grpc.ServerStreamingClient[electordv1.LeaderEvent]) *electordv1.LeaderEvent {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return ev
}

func TestWatchLeaderSequence(t *testing.T) {
	c, _, cl := cluster(t, 3)
	c.Elect(1)
	ctx := ctxT(t)
	s, err := cl[1].WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ev := recv(t, s)
	if ev.Seq != 1 || ev.Leader.Id != 1 || ev.Dropped != 0 {
		t.Fatalf("first event = %v", ev)
	}
	t1 := ev.Leader.Term

	c.NoLeader() // explicit no-leader event, same term
	ev = recv(t, s)
	if ev.Seq != 2 || ev.Leader.Id != 0 || ev.Leader.Term != t1 || ev.Leader.State != node.StateElecting {
		t.Fatalf("no-leader event = %v", ev)
	}
	c.Elect(1) // same leader, new term: still an event
	ev = recv(t, s)
	if ev.Seq != 3 || ev.Leader.Id != 1 || ev.Leader.Term <= t1 {
		t.Fatalf("term change event = %v", ev)
	}
	c.Elect(2)
	ev = recv(t, s)
	if ev.Seq != 4 || ev.Leader.Id != 2 || !ev.Leader.Self || ev.Leader.State != node.StateLeader {
		t.Fatalf("self-leader event = %v", ev)
	}
}

func TestWatchLeaderAfterTerm(t *testing.T) {
	c, _, cl := cluster(t, 3)
	c.Elect(3)
	cur := uint64(c.Term())
	ctx := ctxT(t)

	// Resuming at the current term: the current view is sent (seq 1).
	s, err := cl[0].WatchLeader(ctx, &electordv1.WatchLeaderRequest{AfterTerm: cur})
	if err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, s); ev.Seq != 1 || ev.Leader.Term != cur || ev.Leader.Id != 3 {
		t.Fatalf("resume at current term: %v", ev)
	}
	// The leader of that term is lost: same term, and it must be told.
	c.NoLeader()
	if ev := recv(t, s); ev.Seq != 2 || ev.Leader.Id != 0 || ev.Leader.Term != cur {
		t.Fatalf("no-leader at after_term: %v", ev)
	}

	// A watcher that has seen a later term than this node knows: stale
	// views are skipped until the node catches up.
	future := uint64(election.NextTerm(election.NextTerm(c.Term(), 1), 1))
	s2, err := cl[0].WatchLeader(ctx, &electordv1.WatchLeaderRequest{AfterTerm: future})
	if err != nil {
		t.Fatal(err)
	}
	c.Elect(1) // still below future
	c.Elect(1) // == future
	ev := recv(t, s2)
	if ev.Seq != 1 || ev.Leader.Term != future || ev.Leader.Id != 1 {
		t.Fatalf("first event after catching up = %v (future %d)", ev, future)
	}
}

// blockingStream is a WatchLeader server stream whose Send reports each
// event and waits for permission.
type blockingStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *electordv1.LeaderEvent
	gate chan struct{}
}

func (b *blockingStream) Context() context.Context { return b.ctx }
func (b *blockingStream) Send(ev *electordv1.LeaderEvent) error {
	b.sent <- ev
	select {
	case <-b.gate:
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

func TestWatchLeaderDroppedAndDedup(t *testing.T) {
	c := apitest.NewCluster(2)
	c.SetSubscriptionBuffer(2)
	c.Elect(1)
	svc := api.NewElectorService(c.Node(2))
	ctx, cancel := context.WithCancel(context.Background())
	st := &blockingStream{ctx: ctx, sent: make(chan *electordv1.LeaderEvent, 10), gate: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- svc.WatchLeader(&electordv1.WatchLeaderRequest{}, st) }()

	first := <-st.sent // the service has subscribed and is blocked in Send
	if first.Seq != 1 || first.Dropped != 0 {
		t.Fatalf("first = %v", first)
	}
	for range 5 { // 5 changes into a buffer of 2: 3 dropped
		c.Elect(2)
	}
	st.gate <- struct{}{}
	ev := <-st.sent
	if ev.Seq != 2 || ev.Dropped != 3 {
		t.Fatalf("after a slow read: %v; want seq 2 dropped 3", ev)
	}
	st.gate <- struct{}{}
	ev = <-st.sent
	if ev.Seq != 3 || ev.Dropped != 0 {
		t.Fatalf("next: %v; want seq 3 dropped 0", ev)
	}
	last := ev.Leader.Term
	go func() { st.gate <- struct{}{} }()
	// The same state again is not repeated; the next change is.
	if err := c.Node(1).Revive(ctx); err != nil { // republishes the same views
		t.Fatal(err)
	}
	c.Elect(1)
	ev = <-st.sent
	if ev.Seq != 4 || ev.Leader.Id != 1 || ev.Leader.Term <= last {
		t.Fatalf("after dedup: %v", ev)
	}
	cancel()
	if err := <-done; grpcstatus.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchLeader ended with %v; want Canceled", err)
	}
	if n := c.Node(2).Subscribers(); n != 0 {
		t.Fatalf("%d subscriptions left open", n)
	}
}

func TestWatchLeaderSubscriptionEnds(t *testing.T) {
	c, _, cl := cluster(t, 1)
	s, err := cl[0].WatchLeader(ctxT(t), &electordv1.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, s)
	c.CloseSubscriptions()
	_, err = s.Recv()
	wantCode(t, err, codes.Unavailable, "subscription ended")
}

func TestKillReviveLocalAndForwarded(t *testing.T) {
	c, _, cl := cluster(t, 3)
	c.Elect(3)
	ctx := ctxT(t)

	// Local.
	resp, err := cl[0].Kill(ctx, &electordv1.KillRequest{Id: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Killed(1) || !strings.Contains(resp.Message, "node 1 killed") {
		t.Fatalf("kill 1 at 1: %v killed=%v", resp, c.Killed(1))
	}
	// Forwarded to a killed member: its api still answers.
	if _, err := cl[1].Revive(ctx, &electordv1.ReviveRequest{Id: 1}); err != nil {
		t.Fatal(err)
	}
	if c.Killed(1) {
		t.Fatal("revive 1 at 2 was not forwarded")
	}
	// Forwarded kill of the leader.
	resp, err = cl[0].Kill(ctx, &electordv1.KillRequest{Id: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Killed(3) || resp.Leader.Id != 0 || resp.Leader.Self {
		t.Fatalf("kill 3 at 1: %v killed=%v", resp, c.Killed(3))
	}

	_, err = cl[0].Kill(ctx, &electordv1.KillRequest{Id: 9})
	wantCode(t, err, codes.NotFound, "node 9 is not a member")
	_, err = cl[0].Revive(ctx, &electordv1.ReviveRequest{Id: 9})
	wantCode(t, err, codes.NotFound, "node 9")
	_, err = cl[0].Transfer(ctx, &electordv1.TransferRequest{Id: 9})
	wantCode(t, err, codes.NotFound, "node 9")
	_, err = cl[0].Kill(ctx, &electordv1.KillRequest{})
	wantCode(t, err, codes.InvalidArgument, "id")
}

func TestKillExit(t *testing.T) {
	c, _, cl := cluster(t, 2)
	ctx := ctxT(t)
	resp, err := cl[0].Kill(ctx, &electordv1.KillRequest{Id: 2, Exit: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Message, "exiting") {
		t.Fatalf("reply = %v", resp)
	}
	select {
	case <-c.Node(2).Exited():
	case <-ctx.Done():
		t.Fatal("Exit was not called")
	}
	select {
	case <-c.Node(1).Exited():
		t.Fatal("node 1 exited too")
	default:
	}
}

func TestResignTransferRouting(t *testing.T) {
	c, srvs, cl := cluster(t, 3)
	ctx := ctxT(t)

	_, err := cl[0].Resign(ctx, &electordv1.ResignRequest{})
	wantCode(t, err, codes.Unavailable, "no leader is known")
	if st := grpcstatus.Convert(err); len(st.Details()) != 1 {
		t.Fatalf("no-leader Unavailable has details %v; want the node's LeaderInfo", st.Details())
	}
	_, err = cl[0].Transfer(ctx, &electordv1.TransferRequest{Id: 2})
	wantCode(t, err, codes.Unavailable, "no leader is known")

	c.Elect(3)
	// Resign at a follower goes to the leader; node 2 leads next (rank).
	resp, err := cl[0].Resign(ctx, &electordv1.ResignRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Message, "node 3 resigned") || resp.Leader.Id != 2 {
		t.Fatalf("resign via 1: %v", resp)
	}
	// Transfer at a follower goes to the leader (2), which hands over to 1.
	resp, err = cl[2].Transfer(ctx, &electordv1.TransferRequest{Id: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The reply is the view of the node that acted (2).
	if resp.Leader.Id != 1 || resp.Leader.Self || !strings.Contains(resp.Message, "node 2 handed leadership to node 1") {
		t.Fatalf("transfer via 3: %v", resp)
	}
	// Transfer to the node that leads changes nothing.
	before := c.Term()
	resp, err = cl[1].Transfer(ctx, &electordv1.TransferRequest{Id: 1})
	if err != nil || !strings.Contains(resp.Message, "already leads") || c.Term() != before {
		t.Fatalf("transfer to the leader: %v %v", resp, err)
	}
	// A transfer to a dead member: the leader's error comes back as it is.
	c.Node(2).Kill(ctx)
	_, err = cl[2].Transfer(ctx, &electordv1.TransferRequest{Id: 2})
	wantCode(t, err, codes.FailedPrecondition, election.ErrNoCandidate.Error())

	// The leader's api is down: the forward fails, naming the target, and
	// the error says the answering node did answer.
	srvs[0].Stop()
	_, err = cl[2].Resign(ctx, &electordv1.ResignRequest{})
	wantCode(t, err, codes.Unavailable, "resign: node 1 at "+srvs[0].Addr+" did not answer")
	if st := grpcstatus.Convert(err); len(st.Details()) != 1 {
		t.Fatal("forward failure has no LeaderInfo detail")
	}
}

func TestForwardedCommandIsNotForwardedAgain(t *testing.T) {
	c, _, cl := cluster(t, 2)
	c.Elect(2)
	ctx := metadata.AppendToOutgoingContext(ctxT(t), api.ForwardedKey, "9")
	_, err := cl[0].Resign(ctx, &electordv1.ResignRequest{})
	wantCode(t, err, codes.FailedPrecondition, "node 1 does not lead")
	_, err = cl[0].Kill(ctx, &electordv1.KillRequest{Id: 2})
	wantCode(t, err, codes.FailedPrecondition, "forwarded")
}

func TestCommandDeadline(t *testing.T) {
	c, _, cl := cluster(t, 2)
	c.Elect(2)
	c.SetBlocked(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	// Forwarded from 1 to the leader 2, whose loop is stuck: the caller's
	// deadline ends both calls.
	_, err := cl[0].Resign(ctx, &electordv1.ResignRequest{})
	if grpcstatus.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v; want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}
