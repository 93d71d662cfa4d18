package membership

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// timesAsked is how many proofs of id p was asked for.
func (p *proofs) timesAsked(id election.NodeID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.asked {
		if a == id {
			n++
		}
	}
	return n
}

// With proofs on, a node that gossips an id no one else claims but cannot
// prove it is never a member: no Join, not listed, counted and reported
// with its reason, and asked again with a back-off; a node that can prove
// its id joins meanwhile as usual. Without proofs (TLS off) the same node
// is a member, as before.
func TestUnprovenNodeIsNeverAMember(t *testing.T) {
	defer func(lo, hi time.Duration) { proofRetryMin, proofRetryMax = lo, hi }(proofRetryMin, proofRetryMax)
	proofRetryMin, proofRetryMax = 50*time.Millisecond, 200*time.Millisecond
	const intruder = 9
	p := newProofs(intruder)
	n1 := startClaimant(t, 1, p, 0)
	n2 := startClaimant(t, 2, p, 0)
	n2.join(n1.LocalAddr())
	n1.wait("join of 2", is(Join, 2), nil)
	n2.wait("join of 1", is(Join, 1), nil)

	in := startClaimant(t, intruder, nil, 0) // no certificate: it proves nothing
	in.join(n1.LocalAddr())
	notAdmitted := about(intruder, Join, Update, Dead, Leave)
	for _, n := range []*testNode{n1, n2} {
		ev := n.wait("refusal of the intruder", is(Conflict, intruder), notAdmitted)
		for _, want := range []string{"refused claim: node 9 at", "claims membership", "cannot prove id 9 on its peer address 127.0.0.1:9009",
			"stand-in refusal", "it is not admitted as a member", "reason: unproven id"} {
			if !strings.Contains(ev.Detail, want) {
				t.Errorf("node %s: detail %q lacks %q", n.name, ev.Detail, want)
			}
		}
		if !n.logs.find("ERROR", "unproven id") {
			t.Errorf("node %s: no Error log naming the reason", n.name)
		}
	}
	// Asked again, with a back-off, and still refused; logged once.
	waitFor(t, "three proofs of the intruder on each node", func() bool { return p.timesAsked(intruder) >= 6 })
	late := startClaimant(t, 4, p, 0)
	late.join(n2.LocalAddr())
	for _, n := range []*testNode{n1, n2} {
		n.wait("join of the late node", is(Join, 4), notAdmitted)
		if got := ids(n.Members()); !slices.Equal(got, []election.NodeID{1, 2, 4}) {
			t.Errorf("node %s: Members() = %v, want [1 2 4]", n.name, got)
		}
		if n.RefusedClaims() < 3 || n.Unproven() != 1 {
			t.Errorf("node %s: RefusedClaims() = %d, Unproven() = %d; want at least 3 and 1", n.name, n.RefusedClaims(), n.Unproven())
		}
		refusals := 0
		for _, ev := range append(n.seen, n.pending...) {
			if is(Conflict, intruder)(ev) {
				refusals++
			}
		}
		if refusals != 1 {
			t.Errorf("node %s: %d refusals reported, want 1 (rate-limited)", n.name, refusals)
		}
	}

	// TLS off: nothing proves an id, and the same node is a member.
	o1 := startClaimant(t, 1, nil, 0)
	o2 := startClaimant(t, intruder, nil, 0)
	o2.join(o1.LocalAddr())
	o1.wait("join of the unproven node without proofs", is(Join, intruder), nil)
}

// A member that changes its peer address proves it again: until the new
// address is proven the others keep the one it proved (no Update), and a
// refused address never withdraws it; once proven, Update. A member that
// dies and comes back at the same addresses is proved again too.
func TestChangedClaimIsProvedAgain(t *testing.T) {
	defer func(lo, hi time.Duration) { proofRetryMin, proofRetryMax = lo, hi }(proofRetryMin, proofRetryMax)
	proofRetryMin, proofRetryMax = 50*time.Millisecond, 200*time.Millisecond
	p := newProofs()
	n1 := startClaimant(t, 1, p, 0)
	n3 := startClaimant(t, 3, p, 0)
	n3.join(n1.LocalAddr())
	first := n1.wait("join of 3", is(Join, 3), nil)
	asked := p.timesAsked(3)

	const bad, good = "127.0.0.1:6003", "127.0.0.1:6103"
	p.mu.Lock()
	p.refusePeer[bad] = true
	p.mu.Unlock()
	moved := first.Member
	moved.PeerAddr = bad
	if err := n3.SetMeta(moved, time.Second); err != nil {
		t.Fatal(err)
	}
	ev := n1.wait("refusal of the new peer address", is(Conflict, 3), about(3, Update, Dead, Leave))
	if !strings.Contains(ev.Detail, "peer address "+bad) || !strings.Contains(ev.Detail, "it stays a member at the peer address it proved, "+first.Member.PeerAddr) {
		t.Errorf("detail %q", ev.Detail)
	}
	if ms := n1.Members(); len(ms) != 2 || ms[1] != first.Member {
		t.Errorf("Members() = %+v, want node 3 as it proved itself, %+v", ms, first.Member)
	}

	moved.PeerAddr = good
	if err := n3.SetMeta(moved, time.Second); err != nil {
		t.Fatal(err)
	}
	ev = n1.wait("update to the proven address", is(Update, 3), about(3, Dead, Leave))
	if ev.Member.PeerAddr != good {
		t.Errorf("Update %+v, want peer address %s", ev.Member, good)
	}
	if got := p.timesAsked(3); got < asked+2 {
		t.Errorf("node 3 was proved %d times after its join, want at least 2 more", got-asked)
	}

	// A new life: shut down, then back at a new gossip address.
	asked = p.timesAsked(3)
	n3.Shutdown()
	n1.wait("death of 3", is(Dead, 3), nil)
	back := startClaimant(t, 3, p, 0)
	back.join(n1.LocalAddr())
	n1.wait("join of 3 again", is(Join, 3), nil)
	if p.timesAsked(3) <= asked {
		t.Errorf("node 3 back was not proved again")
	}
}

// Proofs run at most maxProofs at a time, off the caller's goroutine, and
// every queued member is proven in the end.
func TestProofsAreBounded(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	prove := func(ctx context.Context, id election.NodeID, peer string) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return nil
	}
	m, err := New(Config{Self: metaFor(1, "n1"), BindAddr: "127.0.0.1:0", Preset: "local", Prove: prove})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	defer once.Do(func() { close(release) })
	const n = 3 * maxProofs
	m.mu.Lock()
	for i := range n {
		id := election.NodeID(100 + i)
		mb := &member{name: fmt.Sprint(id), addr: fmt.Sprintf("127.0.0.1:%d", 20000+i), valid: true, meta: metaFor(id, "")}
		m.members[mb.name] = mb
		m.q.push(m.settleLocked(slotOf(id), mb.name)...)
	}
	m.mu.Unlock()
	waitFor(t, "maxProofs proofs under way", func() bool { return running.Load() == maxProofs })
	once.Do(func() { close(release) })
	waitFor(t, "every member admitted", func() bool { return len(m.Members()) == n+1 })
	if got := most.Load(); got != maxProofs {
		t.Errorf("at most %d proofs ran at once, want %d", got, maxProofs)
	}
}
