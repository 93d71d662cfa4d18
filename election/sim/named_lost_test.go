package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestNamedLostCandidacy pins what one lost Candidacy does, as the node is
// built at first and with anti-entropy (Mends.ResendEvery, as the node now does). Node 1's app stands in
// "jobs" and node 1 leads; its Candidacy that says so to node 3, which
// stands in nothing (an observer), is lost (a lossy link, or a send that
// failed: a Candidacy is sent once and dropped on failure). Without the
// resend, node 3 shows no leader for as long as node 1 leads: nothing sends
// the leadership again. With ResendEvery the next resend repairs it within
// NamedBound.
func TestNamedLostCandidacy(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, mends := range []Mends{{}, {ResendEvery: 20}} {
			ns := newNamedWith(t, algo, mends)
			lost := false
			ns.Hook = func(m election.Message) bool {
				if m.Type == election.MsgCandidacy && m.To == 3 && m.Term != 0 && !lost {
					lost = true
					return false
				}
				return true
			}
			if _, err := ns.Stand(1, "jobs", "a", 0); err != nil {
				t.Fatal(err)
			}
			bound := NamedBound(3)
			ok, err := ns.RunUntil(10*bound, func() bool { _, _, ok := ns.AgreedNamed("jobs"); return ok })
			if err != nil {
				t.Fatalf("%s %+v: %v", algo, mends, err)
			}
			l, _ := ns.View(3, "jobs")
			switch {
			case !lost:
				t.Fatalf("%s: no Candidacy was lost", algo)
			case mends.ResendEvery == 0 && (ok || l != 0):
				t.Errorf("%s without the resend: the lost Candidacy was repaired (agreed %v, node 3 shows %d); update this test and docs/ELECTIONS.md", algo, ok, l)
			case mends.ResendEvery != 0 && (!ok || ns.Now() > uint64(bound)):
				t.Errorf("%s with ResendEvery: agreed %v at tick %d, bound %d: %s", algo, ok, ns.Now(), bound, ns.DescribeNamed("jobs"))
			}
			t.Logf("%s %+v: agreed=%v at tick %d: %s", algo, mends, ok, ns.Now(), ns.DescribeNamed("jobs"))
		}
	}
}

// TestNamedQuickRestart: a node that crashes and comes back before gossip
// notices (docs/ELECTIONS.md, "A node restarted faster than gossip
// notices"). Nobody saw it leave or join, so nobody sends it their
// candidacies again (a reply goes only to a candidate new to the
// receiver), and its new loop knows none: without the resend it stands alone and
// leads at a term of its own, while node 1 leads on, both for good. With
// ResendEvery the next resend repairs it within NamedBound.
func TestNamedQuickRestart(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, mends := range []Mends{{}, {ResendEvery: 20}} {
			ns := newNamedWith(t, algo, mends)
			for id := election.NodeID(1); id <= 2; id++ {
				if _, err := ns.Stand(id, "jobs", "", 0); err != nil {
					t.Fatal(err)
				}
				if err := ns.Run(5); err != nil {
					t.Fatal(err)
				}
			}
			bound := NamedBound(3)
			if ok, err := ns.RunUntil(bound, func() bool { _, _, ok := ns.AgreedNamed("jobs"); return ok }); err != nil || !ok {
				t.Fatalf("%s: no first agreement: %v %s", algo, err, ns.DescribeNamed("jobs"))
			}
			ns.Crash(2)
			if err := ns.Restart(2); err != nil {
				t.Fatal(err)
			}
			start := ns.Now()
			ok, err := ns.RunUntil(10*bound, func() bool { _, _, ok := ns.AgreedNamed("jobs"); return ok })
			if err != nil {
				t.Fatalf("%s %+v: %v", algo, mends, err)
			}
			both := ns.Machine(1, "jobs").Status().Role == election.RoleLeader && ns.Machine(2, "jobs").Status().Role == election.RoleLeader
			switch {
			case mends.ResendEvery == 0 && (ok || !both):
				t.Errorf("%s without the resend: the quick restart converged (agreed %v); update this test and docs/ELECTIONS.md: %s", algo, ok, ns.DescribeNamed("jobs"))
			case mends.ResendEvery != 0 && (!ok || ns.Now()-start > uint64(bound)):
				t.Errorf("%s with ResendEvery: agreed %v after %d ticks, bound %d: %s", algo, ok, ns.Now()-start, bound, ns.DescribeNamed("jobs"))
			}
			t.Logf("%s %+v: agreed=%v after %d ticks: %s", algo, mends, ok, ns.Now()-start, ns.DescribeNamed("jobs"))
		}
	}
}

// newNamedWith is a cluster of three nodes with mends.
func newNamedWith(t *testing.T, algo string, mends Mends) *Named {
	t.Helper()
	ns, err := NewNamed(Options{N: 3, Algorithm: algo, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ns.Mends = mends
	return ns
}
