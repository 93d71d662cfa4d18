package node

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gossipHub is a fake membership for unit tests: every live member sees
// every other join, leave and die at once. The real memberlist is tested in
// membership/ and end to end in the integration tests.
type gossipHub struct {
	mu      sync.Mutex
	members map[election.NodeID]*fakeGossip
	// unseen: ids whose next join the others are not told of (quietRestart).
	unseen map[election.NodeID]bool
}

type fakeGossip struct {
	hub    *gossipHub
	self   Meta
	events chan MemberEvent
	left   bool
	// quiet: Shutdown tells the others nothing (quietRestart).
	quiet bool
}

func (h *gossipHub) join(self Meta) *fakeGossip {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := &fakeGossip{hub: h, self: self, events: make(chan MemberEvent, 1024)}
	unseen := h.unseen[self.ID]
	delete(h.unseen, self.ID)
	for _, o := range h.members {
		if !unseen {
			o.events <- MemberEvent{Type: MemberJoin, Member: self}
		}
		g.events <- MemberEvent{Type: MemberJoin, Member: o.self}
	}
	g.events <- MemberEvent{Type: MemberSynced}
	h.members[self.ID] = g
	return g
}

func (g *fakeGossip) Events() <-chan MemberEvent { return g.events }
func (g *fakeGossip) ReportsSynced()             {}
func (g *fakeGossip) Leave(time.Duration) error  { g.left = true; return nil }
func (g *fakeGossip) Shutdown() error {
	g.hub.mu.Lock()
	defer g.hub.mu.Unlock()
	delete(g.hub.members, g.self.ID)
	if g.quiet {
		return nil
	}
	typ := MemberDead
	if g.left {
		typ = MemberLeave
	}
	for _, o := range g.hub.members {
		o.events <- MemberEvent{Type: typ, Member: g.self}
	}
	return nil
}

type cluster struct {
	t      testing.TB
	net    *transport.Network
	hub    *gossipHub
	nodes  map[election.NodeID]*Node
	cancel map[election.NodeID]context.CancelFunc
	dirs   map[election.NodeID]string
	algo   string
	quorum int
	// expect is each node's BootstrapExpect: the cluster's size, as
	// `electord dev` and the manifests set it. Without it the first
	// election depends on start order: on a loaded host node 3 of 3 came
	// up after node 2 had waited a leader timeout and won, and tests
	// that expect the highest node to lead first failed.
	expect int
	// wrap, if set, wraps each node's transport.
	wrap func(election.NodeID, transport.Transport) transport.Transport
	// tune, if set, changes each node's config before it starts.
	tune func(*Config)
}

func newCluster(t *testing.T, algo string, n int) *cluster {
	return newClusterWith(t, algo, n, nil)
}

func newClusterWith(t *testing.T, algo string, n int, wrap func(election.NodeID, transport.Transport) transport.Transport) *cluster {
	return newQuorumCluster(t, algo, n, 0, wrap)
}

// newQuorumCluster starts n nodes with the given quorum (0: plain mode).
func newQuorumCluster(t *testing.T, algo string, n, quorum int, wrap func(election.NodeID, transport.Transport) transport.Transport) *cluster {
	return newTunedCluster(t, algo, n, quorum, wrap, nil)
}

// newTunedCluster is newQuorumCluster with tune applied to each node's
// config before it starts.
func newTunedCluster(t testing.TB, algo string, n, quorum int, wrap func(election.NodeID, transport.Transport) transport.Transport, tune func(*Config)) *cluster {
	c := &cluster{t: t, net: transport.NewNetwork(), hub: &gossipHub{members: map[election.NodeID]*fakeGossip{}},
		nodes: map[election.NodeID]*Node{}, cancel: map[election.NodeID]context.CancelFunc{}, dirs: map[election.NodeID]string{},
		algo: algo, quorum: quorum, wrap: wrap, tune: tune, expect: n}
	for i := 1; i <= n; i++ {
		c.start(election.NodeID(i))
	}
	t.Cleanup(func() {
		for id := range c.cancel {
			c.stop(id)
		}
	})
	return c
}

func (c *cluster) start(id election.NodeID) *Node {
	c.t.Helper()
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	store, err := OpenTermStore(c.dirs[id])
	if err != nil {
		c.t.Fatal(err)
	}
	self := Meta{ID: id, Name: fmt.Sprintf("n%d", id), PeerAddr: fmt.Sprintf("mem:%d", id), APIAddr: fmt.Sprintf("api:%d", id)}
	in := NewInbox(0)
	var tr transport.Transport = c.net.Join(id, in)
	if c.wrap != nil {
		tr = c.wrap(id, tr)
	}
	cfg := fast(Config{Self: self, Algorithm: c.algo, Store: store, Transport: tr, Inbox: in, Quorum: c.quorum, BootstrapExpect: c.expect,
		NewMembership: func() (Membership, error) { return c.hub.join(self), nil }})
	if c.tune != nil {
		c.tune(&cfg)
	}
	nd, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Labelled, a CPU profile of the cluster splits by node
	// (go tool pprof -tagfocus node=N).
	go pprof.Do(ctx, pprof.Labels("node", fmt.Sprint(id)), func(ctx context.Context) { nd.Run(ctx) })
	c.nodes[id], c.cancel[id] = nd, cancel
	return nd
}

// quietRestart stops node id and starts it again without the others being
// told by gossip, as when a process is killed and restarted faster than
// memberlist declares it dead: they see no Dead, Leave or Join of it.
func (c *cluster) quietRestart(id election.NodeID) *Node {
	c.t.Helper()
	c.hub.mu.Lock()
	c.hub.members[id].quiet = true
	if c.hub.unseen == nil {
		c.hub.unseen = map[election.NodeID]bool{}
	}
	c.hub.unseen[id] = true
	c.hub.mu.Unlock()
	c.stop(id)
	return c.start(id)
}

// standApps campaigns in name with an app ("app-ID") on nodes 1..n, each
// closed when the test ends.
func (c *cluster) standApps(name string, n int) {
	c.t.Helper()
	for id := election.NodeID(1); id <= election.NodeID(n); id++ {
		a, err := c.nodes[id].Campaign(context.Background(), name, fmt.Sprintf("app-%d", id), 0)
		if err != nil {
			c.t.Fatal(err)
		}
		c.t.Cleanup(func() { a.Close() })
	}
}

func (c *cluster) stop(id election.NodeID) {
	if cancel := c.cancel[id]; cancel != nil {
		cancel()
		<-c.nodes[id].Done()
		delete(c.cancel, id)
	}
}

// agree waits until every running, unkilled node names the same leader.
func (c *cluster) agree(deadline time.Duration, want election.NodeID) LeaderInfo {
	c.t.Helper()
	end := time.Now().Add(deadline)
	for {
		var first LeaderInfo
		ok := true
		for id, n := range c.nodes {
			if c.cancel[id] == nil || n.Status().Killed {
				continue
			}
			li := n.Leader()
			if !li.HasLeader() || (first.HasLeader() && (li.ID != first.ID || li.Term != first.Term)) {
				ok = false
				break
			}
			first = li
		}
		if ok && first.HasLeader() && (want == 0 || first.ID == want) {
			return first
		}
		if time.Now().After(end) {
			var views []string
			for id, n := range c.nodes {
				views = append(views, fmt.Sprintf("%d:%+v", id, n.Leader()))
			}
			c.t.Fatalf("no agreement on leader %d within %v: %v", want, deadline, views)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

func TestNodeElectsAndFailsOver(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			li := c.agree(5*time.Second, 3)
			if !c.nodes[3].Leader().Self || c.nodes[1].Leader().Self {
				t.Fatal("Self must be true on the leader only")
			}
			// Kill the leader: peers see it leave and stop answering.
			if err := c.nodes[3].Kill(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := c.nodes[3].in.Receive(transport.Inbound{Msg: election.Message{Type: election.MsgHeartbeat}}); !errors.Is(err, transport.ErrNotServing) {
				t.Fatalf("a killed node must refuse peers: %v", err)
			}
			li2 := c.agree(5*time.Second, 2)
			if li2.Term <= li.Term {
				t.Fatalf("new term %v not above %v", li2.Term, li.Term)
			}
			// Revive: it comes back from its persisted term and follows (sticky).
			if err := c.nodes[3].Revive(context.Background()); err != nil {
				t.Fatal(err)
			}
			li3 := c.agree(5*time.Second, 2)
			if li3.Term != li2.Term {
				t.Fatalf("a revived node must not disturb a healthy leader: %v -> %v", li2.Term, li3.Term)
			}
		})
	}
}

func TestNodeResignTransferAndWatch(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(5*time.Second, 3)
			sub := c.nodes[1].Subscribe()
			defer sub.Close()
			if err := c.nodes[1].Resign(context.Background()); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("Resign on a follower: %v", err)
			}
			if err := c.nodes[3].Resign(context.Background()); err != nil {
				t.Fatal(err)
			}
			li := c.agree(5*time.Second, 2)
			if err := c.nodes[2].Transfer(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			li2 := c.agree(5*time.Second, 1)
			if li2.Term <= li.Term {
				t.Fatalf("transfer term %v not above %v", li2.Term, li.Term)
			}
			if err := c.nodes[1].Transfer(context.Background(), 99); !errors.Is(err, ErrUnknownNode) {
				t.Fatalf("transfer to an unknown id: %v", err)
			}
			// The watch saw leaders 3, 2, 1 in that order, terms increasing.
			var seen []election.NodeID
			var last election.Term
			timeout := time.After(5 * time.Second)
			for len(seen) == 0 || seen[len(seen)-1] != 1 {
				select {
				case ev := <-sub.C():
					if ev.Term < last {
						t.Fatalf("watch went back from term %v to %v", last, ev.Term)
					}
					last = ev.Term
					if ev.HasLeader() && (len(seen) == 0 || seen[len(seen)-1] != ev.ID) {
						seen = append(seen, ev.ID)
					}
				case <-timeout:
					t.Fatalf("watch saw %v", seen)
				}
			}
			if fmt.Sprint(seen) != "[3 2 1]" {
				t.Fatalf("watch saw leaders %v, want [3 2 1]", seen)
			}
		})
	}
}

func TestNodeRestartNeverGoesBackInTerm(t *testing.T) {
	c := newCluster(t, "bully", 3)
	li := c.agree(5*time.Second, 3)
	persisted, err := c.nodes[1].cfg.Store.Load()
	if err != nil || persisted.Term < li.Term || persisted.LeaderTerm != li.Term {
		t.Fatalf("node 1 persisted %+v (err %v), want the leader term %v and a term no lower", persisted, err, li.Term)
	}
	c.stop(1)
	nd := c.start(1) // same data dir
	if got := nd.Status().Term; got < persisted.Term {
		t.Fatalf("restarted at term %v, below the persisted %v", got, persisted.Term)
	}
	if got := nd.Leader().Term; got != persisted.LeaderTerm {
		t.Fatalf("restarted node reports term %v, want the persisted leadership %v", got, persisted.LeaderTerm)
	}
	c.agree(5*time.Second, 3)
}

func TestSlowSubscriberNeverBlocksTheNode(t *testing.T) {
	var h hub
	s := h.add(func() LeaderInfo { return LeaderInfo{} })
	for i := 1; i <= 3*subBuffer; i++ {
		h.publish(LeaderInfo{ID: 1, Term: election.Term(i)})
	}
	if s.Dropped() == 0 || h.dropped.Load() != s.Dropped() {
		t.Fatalf("dropped %d / hub %d", s.Dropped(), h.dropped.Load())
	}
	var last LeaderInfo
	for len(s.C()) > 0 {
		last = <-s.C()
	}
	if last.Term != election.Term(3*subBuffer) {
		t.Fatalf("the newest event must survive, got term %v", last.Term)
	}
	s.Close()
	if _, ok := <-s.C(); ok {
		t.Fatal("Close must close the channel")
	}
}

func TestInboxFullIsRefusedNotBlocked(t *testing.T) {
	in := NewInbox(2)
	n, err := New(fast(Config{Self: Meta{ID: 1}, Algorithm: "ring", Inbox: in,
		Transport: transport.NewNetwork().Join(1, in), NewMembership: func() (Membership, error) { return nil, errors.New("unused") }}))
	if err != nil {
		t.Fatal(err)
	}
	in.serving.Store(true)
	m := transport.Inbound{Msg: election.Message{Type: election.MsgHeartbeat, From: 2, To: 1, Term: 1}}
	if in.Receive(m) != nil || in.Receive(m) != nil {
		t.Fatal("the first two must queue")
	}
	if err := in.Receive(m); !errors.Is(err, transport.ErrOverloaded) || n.Counters().InboxFull.Load() != 1 {
		t.Fatalf("third: %v (counted %d)", err, n.Counters().InboxFull.Load())
	}
}

func TestTermStoreWritesAReserve(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTermStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t1 := election.NextTerm(0, 3)
	if err := s.Save(t1, 0); err != nil || s.Writes != 1 {
		t.Fatalf("first save: %v, %d writes", err, s.Writes)
	}
	// Terms within the reserve cost no write.
	t2 := t1
	for range ReserveEpochs - 1 {
		t2 = election.NextTerm(t2, 9)
		if err := s.Save(t2, 0); err != nil {
			t.Fatal(err)
		}
	}
	if s.Writes != 1 {
		t.Fatalf("%d writes for terms inside the reserve", s.Writes)
	}
	// A restart starts above every term saved.
	r, _ := OpenTermStore(dir)
	got, err := r.Load()
	if err != nil || got.Term < t2 {
		t.Fatalf("reloaded %v (err %v), below the saved %v", got.Term, err, t2)
	}
	if next := election.NextTerm(got.Term, 3); next <= t2 {
		t.Fatalf("a restarted node would mint %v, not above %v", next, t2)
	}
	// Beyond the reserve it writes again.
	if err := r.Save(election.NextTerm(got.Term, 1), 0); err != nil || r.Writes != 1 {
		t.Fatalf("beyond the reserve: %v, %d writes", err, r.Writes)
	}
}

// TestQuorumLeaderStopsClaimingWhenItsLoopStalls: in quorum mode a leader
// whose loop cannot run (a pause, a starved process) must stop claiming
// leadership by the wall clock when its lease runs out, before its state
// machine gets the chance to notice, since a new leader may be elected by
// then. Without the wall-clock check, Leader() kept saying Self for as long
// as the loop was stalled.
func TestQuorumLeaderStopsClaimingWhenItsLoopStalls(t *testing.T) {
	c := newQuorumCluster(t, "bully", 3, 3, nil)
	li := c.agree(10*time.Second, 0)
	leader := c.nodes[li.ID]
	if !leader.Leader().Self {
		t.Fatalf("leader %d does not claim leadership: %+v", li.ID, leader.Leader())
	}
	// Stall the leader's loop for well over a lease (200ms by default).
	defer stallLoop(leader)()
	deadline := time.Now().Add(2 * time.Second)
	for leader.Leader().Self {
		if time.Now().After(deadline) {
			t.Fatalf("leader %d still claims leadership 2s into a stalled loop; its lease is 200ms", li.ID)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// stallLoop blocks n's loop (a command that does not return) until the
// returned func is called: a paused or starved loop, in process.
func stallLoop(n *Node) (release func()) {
	stalled := make(chan struct{})
	done := make(chan struct{})
	go n.do(context.Background(), func() error { close(stalled); <-done; return nil })
	<-stalled
	return func() { close(done) }
}

// A bully node waits for an Answer at most AnswerTimeout, however long the
// heartbeat interval: crash failover must not wait a heartbeat interval
// when an Election to the dead leader is neither answered nor failed.
func TestAnswerTimeoutIsNotTheHeartbeatInterval(t *testing.T) {
	for _, hb := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		c := Config{Tick: 10 * time.Millisecond, HeartbeatInterval: hb, HeartbeatTimeout: 3 * hb}
		ec := c.electionConfig(0)
		want := min(ticks(hb, c.Tick), ticks(AnswerTimeout, c.Tick))
		if ec.AnswerTimeoutTicks != want || ec.AnswerTimeoutTicks > 3 {
			t.Errorf("heartbeat %v: AnswerTimeoutTicks %d, want %d (at most AnswerTimeout %v at a 10ms tick)", hb, ec.AnswerTimeoutTicks, want, AnswerTimeout)
		}
	}
}

// In quorum mode the lease spans at least three heartbeats, whatever the
// configured interval (config allows a timeout of three intervals): the
// renewing stamp is echoed one heartbeat after it was given.
func TestQuorumLeaseSpansThreeHeartbeats(t *testing.T) {
	for _, hb := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond} {
		for _, k := range []time.Duration{3, 5, 10} {
			c := Config{Self: Meta{ID: 1}, Tick: 10 * time.Millisecond, HeartbeatInterval: hb, HeartbeatTimeout: k * hb, Quorum: 3}
			ec := c.electionConfig(0)
			if ec.LeaseTicks < 3*ec.HeartbeatTicks || ec.Validate() != nil {
				t.Errorf("heartbeat %v, timeout %v: lease %d ticks, heartbeat %d ticks (%v); want a lease of at least 3 heartbeats",
					hb, k*hb, ec.LeaseTicks, ec.HeartbeatTicks, ec.Validate())
			}
		}
	}
}

// TestQuorumLeaseSlackAtDefaults: at the default timings a quorum leader's
// lease survives its followers' heartbeats (or their echoes, or the leader
// itself) running 250 ms late: a follower is counted from a stamp two
// intervals old, so the slack is lease - 2 x interval. It was 150 ms (a
// 150 ms interval, a 450 ms lease), and the one-hour chaos runs saw healthy
// leaders' leases lapse on a loaded host with one follower cut off
// (election/sim TestQuorumLeaseSlack plays that case at these timings).
func TestQuorumLeaseSlackAtDefaults(t *testing.T) {
	c := Config{Self: Meta{ID: 1}, Tick: config.DefaultTick, HeartbeatInterval: config.DefaultHeartbeatInterval,
		HeartbeatTimeout: config.DefaultHeartbeatTimeout, Quorum: 5}
	ec := c.electionConfig(0)
	slack := ec.LeaseTicks - 2*ec.HeartbeatTicks
	if got := time.Duration(slack) * c.Tick; got < 250*time.Millisecond {
		t.Errorf("lease %d ticks, heartbeat %d ticks: slack %v, want at least 250ms", ec.LeaseTicks, ec.HeartbeatTicks, got)
	}
	if ec.PromiseTicks() >= ec.LeaderTimeoutTicks {
		t.Errorf("promise %d ticks, not below the leader timeout %d ticks", ec.PromiseTicks(), ec.LeaderTimeoutTicks)
	}
}

// connectRecorder is a transport that records Connect calls.
type connectRecorder struct {
	transport.Transport
	connected chan election.NodeID
}

func (r connectRecorder) Connect(id election.NodeID) {
	select {
	case r.connected <- id:
	default: // never block the node's loop
	}
}

// A follower opens its connection to a new leader as it takes it up, so the
// leader's crash is seen as a dropped connection (transport.Connector), not
// a heartbeat interval later (issue 10).
func TestFollowerConnectsToItsNewLeader(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			recs := map[election.NodeID]connectRecorder{}
			c := newClusterWith(t, algo, 3, func(id election.NodeID, tr transport.Transport) transport.Transport {
				r := connectRecorder{Transport: tr, connected: make(chan election.NodeID, 16)}
				recs[id] = r
				return r
			})
			li := c.agree(5*time.Second, 0)
			for id, r := range recs {
				if id == li.ID {
					continue
				}
				select {
				case got := <-r.connected:
					for got != li.ID {
						select {
						case got = <-r.connected:
						case <-time.After(5 * time.Second):
							t.Fatalf("node %d connected to %d but not to its leader %d", id, got, li.ID)
						}
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("node %d follows %d and never connected to it", id, li.ID)
				}
			}
		})
	}
}

// An Election the node above refused as overloaded reaches the core as
// EventPeerBusy (the node above is alive), not as a failure; a refused
// connection, or another ResourceExhausted (grpc-go's own, for a message
// above the send limit), is a failure, and only Elections are diverted.
func TestBusyElectionsReachTheCore(t *testing.T) {
	in := NewInbox(8)
	el := election.Message{Type: election.MsgElection, From: 1, To: 2, Term: election.NextTerm(0, 1), Initiator: 1}
	busy := status.Error(codes.ResourceExhausted, transport.ErrOverloaded.Error())
	in.Failed(el, busy)
	in.Failed(election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: el.Term, Leader: 1}, busy)
	in.Failed(el, status.Error(codes.Unavailable, "connection refused"))
	in.Failed(el, status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (9000 vs. 4096)"))
	busyN, failedN := 0, 0
	for f, ok := in.failures.Pop(); ok; f, ok = in.failures.Pop() {
		if f.busy {
			busyN++
		} else {
			failedN++
		}
	}
	if busyN != 1 {
		t.Errorf("%d busy refusals queued, want 1 (the Election refused as overloaded)", busyN)
	}
	if failedN != 3 {
		t.Errorf("%d failures queued, want 3 (the busy Coordinator, the refused connection, the oversized Election)", failedN)
	}
}

// A node without a data dir starts from term 0 after every restart of its
// process, which a quorum-mode state machine would take for a first start
// (no promise given, none to wait out): it is told its store is volatile.
// A data dir's term proves a first start.
func TestElectionConfigVolatileWithoutADataDir(t *testing.T) {
	mem, err := OpenTermStore("")
	if err != nil {
		t.Fatal(err)
	}
	disk, err := OpenTermStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		store *TermStore
		want  bool
	}{{nil, true}, {mem, true}, {disk, false}} {
		cfg := Config{Self: Meta{ID: 1}, Tick: 10 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
			HeartbeatTimeout: 600 * time.Millisecond, Quorum: 3, Store: c.store}
		if got := cfg.electionConfig(0).Volatile; got != c.want {
			t.Errorf("store %+v: Volatile = %v, want %v", c.store, got, c.want)
		}
	}
}
