package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// dropOnce makes the network lose the first message drop matches, silently
// (no delivery, no failure report: a lossy link), and says when it has.
func dropOnce(net *transport.Network, drop func(election.Message) bool) (lost func() bool) {
	var mu sync.Mutex
	done := false
	net.SetHook(func(m election.Message) bool {
		mu.Lock()
		defer mu.Unlock()
		if !done && drop(m) {
			done = true
			return false
		}
		return true
	})
	return func() bool { mu.Lock(); defer mu.Unlock(); return done }
}

// loseDigests makes the network lose every digest node id sends (a
// Candidacy of no election that says what it holds): its members find it
// sends none, and send it a round every period.
func loseDigests(net *transport.Network, id election.NodeID) {
	net.SetHook(func(m election.Message) bool {
		return m.Type != election.MsgCandidacy || m.Election != "" || m.From != id || m.Held == 0
	})
}

// standUntil has nd's app stand in name with value until the test ends
// (or it closes the candidacy), and waits for the event want.
func standUntil(t *testing.T, nd *Node, name, value string, want func(CandidacyEvent) bool) *Candidacy {
	t.Helper()
	a, err := nd.Campaign(context.Background(), name, value, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	nextEvent(t, a, 10*time.Second, want)
	return a
}

// resendTally is what a node's anti-entropy counted (namedResend): the
// copies its rounds resent, the copies it took that changed nothing, the
// digests it took and those that differed from its own.
type resendTally struct{ resent, unchanged, digests, differed uint64 }

// resendCounts reads nd's resend counters on its loop.
func resendCounts(t testing.TB, nd *Node) resendTally {
	t.Helper()
	var k resendTally
	if err := nd.do(context.Background(), func() error {
		r := &nd.named.resend
		k = resendTally{r.resent, r.unchanged, r.digests, r.differed}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return k
}

// A leader's Candidacy that says so to an observer is lost. Nothing else
// would send it again while the leadership lasts: the next round of the
// leader's resend repairs it (TestNamedLostCandidacy in election/sim is
// the same case in the simulator).
func TestNamedResendRepairsALostCandidacy(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(10*time.Second, 0)
			lost := dropOnce(c.net, func(m election.Message) bool {
				return m.Type == election.MsgCandidacy && m.From == 1 && m.To == 3 && m.Term != 0
			})
			a, err := c.nodes[1].Campaign(context.Background(), "jobs", "app-a", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
			observed(t, c.nodes[2], "jobs", 1, "app-a", 10*time.Second)
			// A round is every 20 heartbeat intervals (1 s at the test's
			// timings): the observer learns the leader well within 5 s.
			observed(t, c.nodes[3], "jobs", 1, "app-a", 5*time.Second)
			if !lost() {
				t.Fatal("no Candidacy was lost")
			}
			if resendCounts(t, c.nodes[1]).resent == 0 {
				t.Fatal("node 3 learned the leader, but node 1 resent nothing: the loss was repaired by something else")
			}
		})
	}
}

// A withdrawal that is lost: the observer would show the withdrawn app as
// leading for good; the withdrawal's resend repairs it.
func TestNamedResendRepairsALostWithdrawal(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	a, err := c.nodes[1].Campaign(context.Background(), "jobs", "app-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	observed(t, c.nodes[3], "jobs", 1, "app-a", 10*time.Second)
	lost := dropOnce(c.net, func(m election.Message) bool {
		return m.Type == election.MsgCandidacy && m.From == 1 && m.To == 3 && !m.Confirmed
	})
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		li, known := c.nodes[3].ElectionLeader("jobs")
		if !known && lost() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the withdrawal node 3 shows %+v (known %v, withdrawal lost %v)", li, known, lost())
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// The copies a round sends are, on a settled cluster, what the receivers
// hold already: each is dropped at once, with no event to apps or
// watchers and nothing marked to publish.
func TestNamedResendUnchangedCopyIsANoOp(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	a, err := c.nodes[1].Campaign(ctx, "jobs", "app-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	b, err := c.nodes[2].Campaign(ctx, "jobs", "app-b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nextEvent(t, b, 10*time.Second, isEvent(EventFollower)) // sticky: a leads on
	observed(t, c.nodes[3], "jobs", 1, "app-a", 10*time.Second)
	w, err := c.nodes[3].WatchElection(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-w.C() // the current leadership

	// Node 3 holds every candidacy: only a round that is not a repair
	// resends it one, as to a member whose digests are lost. Two rounds of
	// nodes 1 and 2 (1 s each at the test's timings).
	loseDigests(c.net, 3)
	before := resendCounts(t, c.nodes[3]).unchanged
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := resendCounts(t, c.nodes[3]).unchanged
		if now >= before+4 { // two rounds of nodes 1 and 2
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 3 took %d unchanged copies in 10 s, want 4", now-before)
		}
		select {
		case li := <-w.C():
			t.Fatalf("a watcher on node 3 got %+v from unchanged copies", li)
		case ev := <-a.Events():
			t.Fatalf("app a got %+v from unchanged copies", ev)
		case ev := <-b.Events():
			t.Fatalf("app b got %+v from unchanged copies", ev)
		case <-time.After(20 * time.Millisecond): // polling interval
		}
	}

	// One copy, stepped on node 2's loop as the inbox would: nothing is
	// marked to publish, nothing asked of the store.
	if err := c.nodes[2].do(ctx, func() error {
		nd := c.nodes[2]
		s, ok := nd.named.table.Get("jobs", 1)
		if !ok {
			t.Error("node 2 holds no candidacy of node 1")
			return nil
		}
		m := election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Election: "jobs", Confirmed: true, Value: s.Value,
			FromRank: election.Rank{Priority: s.Priority, ID: 1}, Term: s.LeaderTerm, LeaderSince: s.LeaderSince}
		if s.LeaderSince == 0 {
			t.Error("node 2 holds no start of node 1's leadership")
		}
		nd.stepNamed(transport.Inbound{Msg: m})
		if len(nd.named.dirty) != 0 {
			t.Errorf("an unchanged copy marked %v to publish", nd.named.dirty)
		}
		if nm := nd.named.machines["jobs"]; nm == nil || nm.sm.HasReady() {
			t.Errorf("an unchanged copy gave node 2's machine something to do")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A node killed while a withdrawal is still being resent (its named clock
// runs on for it, with no machine left) stands again after its revive, and
// its named clock ticks: its rounds run and the election is seen.
func TestNamedResendKillWithAWithdrawalPending(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	old, err := c.nodes[1].Campaign(ctx, "old", "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	nextEvent(t, old, 10*time.Second, isEvent(EventLeader))
	old.Close() // node 1 withdraws from "old": its rounds resend that
	if err := c.nodes[1].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[1].Revive(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := c.nodes[1].Campaign(ctx, "jobs", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	b, err := c.nodes[2].Campaign(ctx, "jobs", "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nextEvent(t, b, 10*time.Second, isEvent(EventFollower))
	// Node 1's named clock ticks again: its rounds run (to node 3, whose
	// digests are lost).
	loseDigests(c.net, 3)
	before := resendCounts(t, c.nodes[1]).resent
	deadline := time.Now().Add(10 * time.Second)
	for {
		if now := resendCounts(t, c.nodes[1]).resent; now > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 1 resent nothing within 10 s of standing again after its revive")
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	observed(t, c.nodes[3], "jobs", 1, "a", 10*time.Second)
}

// A cluster that starts together sends no round for want of digests: at a
// node's first period no member had sent one yet, and each sends one by
// the second (a round for a digest that differed, a repair, may come). A
// member whose digests stop arriving (lost, or an older node that never
// sends one) gets a round every period after two without, and no other
// member does.
func TestNamedResendRoundsGoOnlyToAMemberWithoutDigests(t *testing.T) {
	c, _ := quietCluster(t, "bully", 20)
	// Five periods of 400 ms from the start.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for id, nd := range c.nodes {
			if k := resendCounts(t, nd); k.resent != 0 && k.differed == 0 {
				t.Fatalf("node %d resent %d candidacy copies with no digest differing: a round for want of digests", id, k.resent)
			}
		}
	}
	for id, nd := range c.nodes {
		if k := resendCounts(t, nd); k.digests == 0 {
			t.Fatalf("node %d took no digest in 2 s", id)
		}
	}
	var copies [4]atomic.Int64
	c.net.SetHook(func(m election.Message) bool {
		if m.Type != election.MsgCandidacy {
			return true
		}
		if m.Election == "" {
			return m.From != 3 || m.Held == 0 // node 3's digests are lost
		}
		copies[m.To].Add(1)
		return true
	})
	deadline := time.Now().Add(10 * time.Second)
	for copies[3].Load() < 2*20 { // a round of 20 from each of nodes 1 and 2
		if time.Now().After(deadline) {
			t.Fatalf("node 3, whose digests are lost, got %d copies in 10 s, want rounds", copies[3].Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Fewer than a round: a leadership that moved meanwhile (a loaded
	// host) is told to everyone, a round goes to node 3 alone.
	if d1, d2 := copies[1].Load(), copies[2].Load(); d1 >= 20 || d2 >= 20 {
		t.Fatalf("nodes 1 and 2, sending digests, got %d and %d copies: a round", d1, d2)
	}
}

// A node that stands in no election still vouches for the candidacies it
// holds: it sends its digests, and the members that stand send it no round
// (at rest, none at all). Without its digests each would send it every
// candidacy again every period, as to an older node. It leads nothing, so
// it sends no pair heartbeat.
func TestNamedResendObserverSendsDigests(t *testing.T) {
	const k = 20
	c, _ := quietClusterStanding(t, "bully", k, nil, 1, 2) // node 3 stands in none
	var copies, digests, beats atomic.Int64
	c.net.SetHook(func(m election.Message) bool {
		switch {
		case m.Type != election.MsgCandidacy:
		case m.Election != "" && m.To == 3:
			copies.Add(1)
		case m.Election == "" && m.From == 3 && m.Held != 0:
			digests.Add(1)
		case m.Election == "" && m.From == 3:
			beats.Add(1)
		}
		return true
	})
	// Five periods of 400 ms.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		// Fewer than a round: a leadership that moved meanwhile (a loaded
		// host) is told to node 3 too.
		if n := copies.Load(); n >= k {
			t.Fatalf("node 3, standing in nothing, got %d candidacy copies at rest: rounds", n)
		}
	}
	if digests.Load() == 0 {
		t.Fatal("node 3 sent no digest in five periods")
	}
	if n := beats.Load(); n != 0 {
		t.Fatalf("node 3, leading nothing, sent %d pair heartbeats", n)
	}
}

// A node whose apps all withdrew holds its peers' candidacies still, and
// vouches for them: a copy lost to it later is repaired by the round its
// digest asks for.
func TestNamedResendRepairsACopyLostToANodeThatWithdrew(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	standUntil(t, c.nodes[1], "jobs", "a", isEvent(EventLeader))
	standUntil(t, c.nodes[3], "own", "c", isEvent(EventLeader)).Close()
	// Node 3 has resent its withdrawal for the last time: nothing of its
	// own is left for its named clock.
	nd := c.nodes[3]
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left int
		if err := nd.do(ctx, func() error {
			left = len(nd.named.machines) + len(nd.named.resend.withdrawn)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 3 still resends its withdrawal 15 s after it")
		}
	}
	lost := dropOnce(c.net, func(m election.Message) bool {
		return m.Type == election.MsgCandidacy && m.From == 1 && m.To == 3 && m.Election == "jobs2" && m.Term != 0
	})
	before := resendCounts(t, c.nodes[1])
	standUntil(t, c.nodes[1], "jobs2", "b", isEvent(EventLeader))
	observed(t, c.nodes[2], "jobs2", 1, "b", 10*time.Second)
	observed(t, nd, "jobs2", 1, "b", 5*time.Second) // a period is 1 s at the test's timings
	if !lost() {
		t.Fatal("no Candidacy was lost")
	}
	if after := resendCounts(t, c.nodes[1]); after.differed == before.differed || after.resent == before.resent {
		t.Fatalf("node 3 learned the leader, but not by a round its digest asked for: node 1's counters %+v, then %+v", before, after)
	}
}
