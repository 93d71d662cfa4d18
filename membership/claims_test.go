package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// proofs is a stand-in for the daemon's peer TLS proof: ids in refuse, and
// any id at a peer address in refusePeer, cannot prove themselves, every
// other can. It records what was asked.
type proofs struct {
	mu         sync.Mutex
	refuse     map[election.NodeID]bool
	refusePeer map[string]bool
	asked      []election.NodeID
}

func (p *proofs) prove(_ context.Context, id election.NodeID, peer string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, id)
	if p.refuse[id] || p.refusePeer[peer] {
		return fmt.Errorf("no TLS handshake with a certificate for node %d at its peer address %s: stand-in refusal", id, peer)
	}
	return nil
}

func (p *proofs) set(id election.NodeID, refuse bool) {
	p.mu.Lock()
	p.refuse[id] = refuse
	p.mu.Unlock()
}

func newProofs(refuse ...election.NodeID) *proofs {
	p := &proofs{refuse: map[election.NodeID]bool{}, refusePeer: map[string]bool{}}
	for _, id := range refuse {
		p.refuse[id] = true
	}
	return p
}

// startClaimant starts node id with prove as Config.Prove (nil: none) and, if
// since is not 0, that start time in its metadata.
func startClaimant(t *testing.T, id election.NodeID, prove *proofs, since int64) *testNode {
	t.Helper()
	return startClaimantAt(t, id, metaFor(id, "").PeerAddr, prove, since)
}

// startClaimantAt is startClaimant gossiping peer as its peer address.
func startClaimantAt(t *testing.T, id election.NodeID, peer string, prove *proofs, since int64) *testNode {
	t.Helper()
	logs := &logSink{}
	self := metaFor(id, fmt.Sprintf("n%d", id))
	self.PeerAddr = peer
	cfg := Config{Self: self, BindAddr: "127.0.0.1:0", Preset: "local", Logger: slog.New(logs)}
	if prove != nil {
		cfg.Prove = prove.prove
	}
	cfg.since = since
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%d): %v", id, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return &testNode{Membership: m, t: t, logs: logs}
}

// A term slot shared by two ids goes to the lower id, whatever start time
// either reports: here the higher one, 65537, reports the earlier start (1)
// and is known first, as the forgery did. The lower, 1, takes the
// slot everywhere; 65537 is withdrawn on the bystander and stands down
// itself. (The old rule, "the earlier start keeps it", gave it to 65537.)
func TestSlotGoesToTheLowerID(t *testing.T) {
	const lo, hi, c = 1, 1<<election.SlotBits + 1, 3
	nh := startClaimant(t, hi, nil, 1)
	nc := startClaimant(t, c, nil, 0)
	nc.join(nh.LocalAddr())
	nc.wait("join of the higher id", is(Join, hi), nil)

	nl := startClaimant(t, lo, nil, 0)
	nl.join(nc.LocalAddr())
	ev := nc.wait("the higher id withdrawn", is(Conflict, hi), nil)
	if !strings.Contains(ev.Detail, "the lower id keeps the slot") || !strings.Contains(ev.Detail, "term slot 1") {
		t.Errorf("detail %q", ev.Detail)
	}
	nc.wait("dead of the higher id", is(Dead, hi), nil)
	nc.wait("join of the lower id", is(Join, lo), nil)
	yield := nh.wait("conflict about itself", func(ev Event) bool { return ev.Type == Conflict && ev.Yield }, nil)
	if !strings.Contains(yield.Detail, "whose id is lower") {
		t.Errorf("yield detail %q", yield.Detail)
	}
	nl.wait("join of c", is(Join, c), about(hi, Join))
	for _, n := range []*testNode{nl, nc} {
		if got := ids(n.Members()); !slices.Equal(got, []election.NodeID{lo, c}) {
			t.Errorf("node %s: Members() = %v, want [%d %d]", n.name, got, lo, c)
		}
	}
}

// With proofs on, a lower id takes a slot only once it proved its id: a
// claimant of id 1 that cannot is refused (logged, counted, never
// admitted), and the holder, 65537, stays; when the claimant can prove it,
// it takes the slot.
func TestSlotClaimMustBeProven(t *testing.T) {
	const lo, hi, c = 1, 1<<election.SlotBits + 1, 3
	defer func(d time.Duration) { proofRetryMax = d }(proofRetryMax)
	proofRetryMax = time.Second
	p := newProofs(lo)
	nh := startClaimant(t, hi, p, 0)
	nc := startClaimant(t, c, p, 0)
	nc.join(nh.LocalAddr())
	nc.wait("join of the holder", is(Join, hi), nil)

	forger := startClaimant(t, lo, nil, 1)
	forger.join(nc.LocalAddr())
	for _, n := range []*testNode{nc, nh} {
		ev := n.wait("refused claim", is(Conflict, lo), about(hi, Dead, Conflict))
		if !strings.Contains(ev.Detail, "refused claim") || !strings.Contains(ev.Detail, "cannot prove id 1") || !strings.Contains(ev.Detail, "term slot 1") {
			t.Errorf("node %s: detail %q", n.name, ev.Detail)
		}
		if !n.logs.find("ERROR", "unproven id") {
			t.Errorf("node %s: no Error log naming the reason", n.name)
		}
		if n.RefusedClaims() == 0 {
			t.Errorf("node %s: RefusedClaims() = 0", n.name)
		}
	}
	if got := ids(nc.Members()); !slices.Equal(got, []election.NodeID{c, hi}) {
		t.Errorf("Members() = %v, want [%d %d]", got, c, hi)
	}
	for _, ev := range nh.seen {
		if ev.Yield {
			t.Errorf("the holder was told to yield: %+v", ev)
		}
	}

	// Now it can prove the id: the retry admits it, and the lower id wins.
	p.set(lo, false)
	nc.wait("dead of the holder", is(Dead, hi), nil)
	nc.wait("join of the proven lower id", is(Join, lo), nil)
	nh.wait("the holder stands down", func(ev Event) bool { return ev.Type == Conflict && ev.Yield }, nil)
}

// Another node claims this node's id and reports an earlier start (1).
// With proofs on and no proof, this node keeps its id (no Yield), logs the
// refusal and counts it. Without proofs, the old rule applies: it yields.
func TestSameIDClaimMustBeProven(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proof *proofs
		yield bool
	}{{"unproven", newProofs(), false}, {"proven", newProofs(), true}, {"no peer TLS", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			const forgerPeer = "127.0.0.1:6007"
			if tc.name == "unproven" {
				tc.proof.refusePeer[forgerPeer] = true
			}
			holder := startClaimant(t, 7, tc.proof, 0)
			other := startClaimant(t, 2, tc.proof, 0)
			other.join(holder.LocalAddr())
			other.wait("join of the holder", is(Join, 7), nil)
			forger := startClaimantAt(t, 7, forgerPeer, nil, 1)
			forger.join(holder.LocalAddr())

			ev := holder.wait("conflict about its own id", is(Conflict, 7), nil)
			if ev.Yield != tc.yield {
				t.Fatalf("Yield = %v, want %v; detail %q", ev.Yield, tc.yield, ev.Detail)
			}
			if tc.yield {
				return
			}
			if !strings.Contains(ev.Detail, "refused claim") || !strings.Contains(ev.Detail, "claims this node's id 7") ||
				!strings.Contains(ev.Detail, "1970-01-01T00:00:00.000000001Z") {
				t.Errorf("detail %q", ev.Detail)
			}
			if holder.RefusedClaims() != 1 || !holder.logs.find("ERROR", "unproven id") {
				t.Errorf("RefusedClaims() = %d, logged: %v", holder.RefusedClaims(), holder.logs.find("ERROR", "unproven id"))
			}
			if got := ids(other.Members()); !slices.Equal(got, []election.NodeID{2, 7}) {
				t.Errorf("Members() = %v", got)
			}
		})
	}
}

// Two sides of a partition each settle term slot 2 on their own holder (2
// on one side, 65538 on the other, each known there long before the heal).
// After the heal every node computes the same holder, 2, with proofs on;
// 65538 stands down.
func TestSlotAfterPartitionHeal(t *testing.T) {
	const lo, hi = 2, 1<<election.SlotBits + 2
	c := &cutNet{}
	p := newProofs()
	var nodes []*Membership
	for _, id := range []election.NodeID{1, lo, 3, hi} {
		m := startCut(t, c, id, nil, func(cfg *Config) { cfg.Prove = p.prove })
		nodes = append(nodes, m)
	}
	sides := map[string]int{}
	for i, m := range nodes {
		sides[m.LocalAddr()] = i / 2 // {1, 2} | {3, 65538}
	}
	c.cut(sides)
	for _, pair := range [][2]int{{1, 0}, {3, 2}} {
		if _, err := nodes[pair[0]].Join([]string{nodes[pair[1]].LocalAddr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitViews(t, nodes, [][]election.NodeID{{1, lo}, {1, lo}, {3, hi}, {3, hi}}, deadline, "each side on its own")
	time.Sleep(time.Second) // each side knows its holder for a while

	c.heal()
	for _, m := range nodes {
		m.RetryJoin()
	}
	if _, err := nodes[2].Join([]string{nodes[0].LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	all := []election.NodeID{1, lo, 3}
	waitViews(t, nodes, [][]election.NodeID{all, all, all, {1, lo, 3, hi}}, deadline, "heal")
	var yielded bool
	for end := time.Now().Add(deadline); !yielded && time.Now().Before(end); {
		select {
		case ev := <-nodes[3].Events():
			yielded = ev.Type == Conflict && ev.Yield
		case <-time.After(time.Until(end)):
		}
	}
	if !yielded {
		t.Errorf("node %d did not stand down", hi)
	}
}
