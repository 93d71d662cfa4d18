package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestHealNeedsARejoin: membership converges after a partition only as
// gossip would. A 2|3 split held past DeadGossipTicks leaves each side
// holding the other dead; with the old retry-join policy (join only when
// alone) nothing joins them again and the two leaders stay, as was seen with
// real processes. With RejoinMissing every node joins the members it lost
// and one leader is agreed. (Before issue 10 the simulator re-merged views
// for free on heal, so the property test could not find this.)
func TestHealNeedsARejoin(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, policy := range []RejoinPolicy{RejoinAlone, RejoinMissing} {
			s, err := New(Options{N: 5, Algorithm: algo, Seed: 3, Rejoin: policy})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := s.RunUntil(L1Bound(5), func() bool { _, _, ok := s.Agreed(); return ok }); err != nil || !ok {
				t.Fatalf("%s: no first agreement: %v %s", algo, err, s.Describe())
			}
			s.Partition([]election.NodeID{1, 2}, []election.NodeID{3, 4, 5})
			if err := s.Run(5 * s.opts.DeadGossipTicks); err != nil {
				t.Fatal(err)
			}
			if got := len(s.Leaders()); got != 2 {
				t.Fatalf("%s: %d leaders during a 2|3 partition without quorum, want one a side: %s", algo, got, s.Describe())
			}
			s.Heal()
			ok, err := s.RunUntil(10*L1Bound(5), func() bool { _, _, ok := s.Agreed(); return ok })
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case policy == RejoinAlone && ok:
				t.Errorf("%s: with the old retry-join the split healed by itself; the model re-merges for free: %s", algo, s.Describe())
			case policy == RejoinMissing && !ok:
				t.Errorf("%s: with RejoinMissing no single leader %d ticks after the heal: %s", algo, 10*L1Bound(5), s.Describe())
			}
		}
	}
}
