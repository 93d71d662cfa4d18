package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/electord/electord/election"
)

// firstAgreementTicks is the bound on a cluster's first election in these
// tests: 500 ticks, 5 s at the daemon's 10 ms tick, the target that
// electbench scale measures on real processes.
const firstAgreementTicks = 500

// formingViews says when each of n nodes learns each other one at the
// start (Options.Forming): at a random tick from 1 to spread.
func formingViews(r *rand.Rand, n, spread int) map[[2]election.NodeID]int {
	learn := map[[2]election.NodeID]int{}
	for a := election.NodeID(1); a <= election.NodeID(n); a++ {
		for b := election.NodeID(1); b <= election.NodeID(n); b++ {
			learn[[2]election.NodeID{a, b}] = 1 + r.IntN(spread)
		}
	}
	return learn
}

// TestFirstElectionWithLateViews: 64 nodes start together with
// BootstrapExpect 64, as `electbench scale --bootstrap-expect` starts them.
// Each learns the others from gossip within half a second, and a sending
// node puts 8 messages on the wire per tick. Three nodes missed the join
// broadcast of one low member and learn it only at a state sync 60 s in
// (memberlist's push/pull at 64 members): until then they are
// bootstrapping. The first agreement, every node included, comes within
// 5 s. A bootstrapping ring node that dropped Elections ended every lap;
// each initiator waited out its round (2n hops) and tried again until the
// late views completed: agreement after 60 s.
func TestFirstElectionWithLateViews(t *testing.T) {
	const n = 64
	for _, algo := range allAlgorithms {
		t.Run(algo, func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(*scenarioSeeds); seed++ {
				r := rand.New(rand.NewPCG(seed, 64))
				learn := formingViews(r, n, 50)
				for range 3 {
					late, missed := election.NodeID(1+r.IntN(n)), election.NodeID(1+r.IntN(n/2))
					if late != missed {
						learn[[2]election.NodeID{late, missed}] = 6000
					}
				}
				s, err := New(Options{N: n, Algorithm: algo, Seed: seed, SendsPerTick: 8,
					Forming: func(at, of election.NodeID) int { return learn[[2]election.NodeID{at, of}] },
					Tune: func(c *election.Config) {
						daemonBullyTimings(c)
						c.BootstrapExpect = n
					}})
				if err != nil {
					t.Fatal(err)
				}
				agreed, err := s.RunUntil(firstAgreementTicks, func() bool { _, _, ok := s.Agreed(); return ok })
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if !agreed {
					t.Fatalf("seed %d: no first agreement within %d ticks with three late views: %s", seed, firstAgreementTicks, s.Describe())
				}
			}
		})
	}
}

// recoveryTicks runs n bully nodes to their first agreement, crashes the
// leader and the highest follower together (the leader's heir, which would
// have announced itself) and returns the ticks until every survivor agrees
// on a new leader. Gossip is slow (it declares the two dead only after the
// election, as memberlist takes seconds), so every survivor still lists both.
func recoveryTicks(t *testing.T, n int) int {
	t.Helper()
	s, err := New(Options{N: n, Algorithm: "bully", Seed: 1, SendsPerTick: 8, GossipEvery: 5000, Tune: daemonBullyTimings})
	if err != nil {
		t.Fatal(err)
	}
	top := election.NodeID(n)
	if ok, err := s.RunUntil(4000, func() bool { l, _, ok := s.Agreed(); return ok && l == top }); err != nil || !ok {
		t.Fatalf("%d nodes: no first agreement on node %d (%v): %s", n, top, err, s.Describe())
	}
	if err := s.Run(300); err != nil { // its announcements settle
		t.Fatal(err)
	}
	s.Crash(top)
	s.Crash(top - 1)
	start := s.Now()
	ok, err := s.RunUntil(4000, func() bool { _, _, ok := s.Agreed(); return ok })
	if err != nil || !ok {
		t.Fatalf("%d nodes: no agreement after the crash (%v): %s", n, err, s.Describe())
	}
	return int(s.Now() - start)
}

// TestFailoverTimeDoesNotGrowWithMembers: when the highest survivor of a
// leader's crash is gone too, the next one takes over after a wait that
// does not depend on the cluster's size: the ranks above it that are gone,
// a head start of at most one leader timeout, and the time its
// announcements take to go out (8 a tick here). A head start of a tick per
// member made it grow by a tick per member: 362 ticks at 256 nodes against
// 131 at 64.
func TestFailoverTimeDoesNotGrowWithMembers(t *testing.T) {
	small, large := recoveryTicks(t, 64), recoveryTicks(t, 256)
	t.Logf("recovery past a dead heir: %d ticks at 64 nodes, %d at 256", small, large)
	sends := (256 - 64) / 8 // the extra announcements' time
	if large > small+sends+10 {
		t.Errorf("recovery took %d ticks at 256 nodes and %d at 64: it grows with the members beyond the %d ticks of extra announcements", large, small, sends)
	}
}

// TestCrashWithSlowSendsNoOneBelowCampaigns: the leader of 256 bully nodes
// crashes and the highest survivor can put only 2 messages a tick on the
// wire, so its 254 announcements take 127 ticks, twice the head start the
// nodes below give it. No node below campaigns: the announcements go out
// highest rank first, and a node r ranks below the highest survivor waits
// r ticks on top of the head start, so each is announced to before its
// wait ends while a send costs less than a tick. Sent lowest first, as they
// were, the announcement reached the nodes just below the highest last,
// after their wait: 50 of them campaigned.
func TestCrashWithSlowSendsNoOneBelowCampaigns(t *testing.T) {
	const n = 256
	s, err := New(Options{N: n, Algorithm: "bully", Seed: 1, SendsPerTick: 2, GossipEvery: 5000, Tune: daemonBullyTimings})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RunUntil(8000, func() bool { l, _, ok := s.Agreed(); return ok && l == n }); err != nil || !ok {
		t.Fatalf("no first agreement on node %d (%v): %s", n, err, s.Describe())
	}
	if err := s.Run(300); err != nil {
		t.Fatal(err)
	}
	s.Crash(n)
	campaigned := map[election.NodeID]bool{}
	ok, err := s.RunUntil(2000, func() bool {
		for id := election.NodeID(1); id < n-1; id++ {
			if r := s.Node(id).Status().Role; r == election.RoleElecting || r == election.RoleLeader {
				campaigned[id] = true
			}
		}
		l, _, ok := s.Agreed()
		return ok && l == n-1
	})
	if err != nil || !ok {
		t.Fatalf("no agreement on node %d after the crash (%v): %s", n-1, err, s.Describe())
	}
	if len(campaigned) > 0 {
		t.Errorf("%d nodes below the highest survivor campaigned while its announcements went out, want none", len(campaigned))
	}
}

// TestRingFirstElectionWithSlowHops: 64 ring nodes form a cluster while
// each hop takes 1 to 7 ticks (a message's random delay), more than the
// tick a hop the round allows (HopTicks): the first lap of a cluster goes
// over connections still being opened on a loaded host. A round whose
// timeout had no room for that timed out every time, and each new round,
// at a newer epoch, superseded the lap still in flight: no agreement in
// 6,000 ticks. A first election's round now has twice the allowance, and
// each round lost doubles it again.
func TestRingFirstElectionWithSlowHops(t *testing.T) {
	const n = 64
	for seed := uint64(1); seed <= uint64(*scenarioSeeds); seed++ {
		learn := formingViews(rand.New(rand.NewPCG(seed, 64)), n, 150)
		s, err := New(Options{N: n, Algorithm: "ring", Seed: seed, SendsPerTick: 4,
			Forming: func(at, of election.NodeID) int { return learn[[2]election.NodeID{at, of}] },
			Tune: func(c *election.Config) {
				daemonBullyTimings(c)
				c.BootstrapExpect = n
			}})
		if err != nil {
			t.Fatal(err)
		}
		s.MaxDelay = 6
		agreed, err := s.RunUntil(firstAgreementTicks+100, func() bool { _, _, ok := s.Agreed(); return ok })
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !agreed {
			t.Fatalf("seed %d: no first agreement within %d ticks with slow hops: %s", seed, firstAgreementTicks+100, s.Describe())
		}
	}
}
