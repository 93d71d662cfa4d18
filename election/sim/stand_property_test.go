package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/electord/electord/election"
)

// TestPropertyWithdrawnNeverLeads: seeded random schedules of crashes,
// restarts, partitions, isolations and heals, in which nodes stop and
// start standing at random (as their candidate probes fail and pass; a
// restarted node stands as its probe last said). A node that does not stand
// never leads, on any tick; the checker's safety properties hold
// throughout; once every fault heals and every node stands, one leader is
// agreed within L1Bound. Preempt is on in half of them.
func TestPropertyWithdrawnNeverLeads(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			// A fifth of -prop.count (200 by default): the suite's run time.
			count := max(1, *propCount/5)
			for i := range count {
				seed := *propSeed + uint64(i)
				if err := runStandSchedule(algo, seed); err != nil {
					t.Fatalf("%s seed %d: %v\nreproduce: go test ./election/sim -run 'TestPropertyWithdrawnNeverLeads/%s' -prop.seed=%d -prop.count=1",
						algo, seed, err, algo, seed)
				}
			}
			t.Logf("%s: %d schedules, seeds %d..%d: no withdrawn node led, L1 held after every heal", algo, count, *propSeed, *propSeed+uint64(count)-1)
		})
	}
}

func runStandSchedule(algo string, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 0x57a4d))
	n, quorum, preempt := 1+r.IntN(6), r.IntN(2) == 0, r.IntN(2) == 0
	s, err := New(Options{N: n, Algorithm: algo, Quorum: quorum, Preempt: preempt, Seed: seed})
	if err != nil {
		return err
	}
	withdrawn := make([]bool, n+1)
	apply := func(id election.NodeID) {
		if s.Up(id) {
			s.Node(id).Stand(!withdrawn[id])
		}
	}
	check := func() error {
		for id := 1; id <= n; id++ {
			if withdrawn[id] && s.Up(election.NodeID(id)) && s.Node(election.NodeID(id)).Status().Role == election.RoleLeader {
				return fmt.Errorf("tick %d: node %d leads while it does not stand: %s", s.Now(), id, s.Describe())
			}
		}
		return nil
	}
	pick := func() election.NodeID { return election.NodeID(1 + r.IntN(n)) }
	for range 200 + r.IntN(300) {
		if r.IntN(6) == 0 {
			switch id := pick(); r.IntN(8) {
			case 0, 1, 2: // the probe flips
				withdrawn[id] = !withdrawn[id]
				apply(id)
			case 3:
				s.Crash(id)
			case 4:
				if err := s.Restart(id); err != nil {
					return err
				}
				apply(id)
			case 5:
				var a, b []election.NodeID
				for i := 1; i <= n; i++ {
					if r.IntN(2) == 0 {
						a = append(a, election.NodeID(i))
					} else {
						b = append(b, election.NodeID(i))
					}
				}
				s.Partition(a, b)
			case 6:
				s.Isolate(id)
			case 7:
				s.Heal()
			}
		}
		if err := s.Step(); err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
	}
	// Everything heals, every node runs; some still do not stand.
	s.Heal()
	for i := 1; i <= n; i++ {
		id := election.NodeID(i)
		if err := s.Restart(id); err != nil {
			return err
		}
		apply(id)
	}
	bound := l1Bound(n, quorum)
	for range bound {
		if err := s.Step(); err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
	}
	// Every node stands: one leader, within L1's bound.
	for i := 1; i <= n; i++ {
		withdrawn[i] = false
		apply(election.NodeID(i))
	}
	ok, err := s.RunUntil(bound, func() bool { _, _, ok := s.Agreed(); return ok })
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no agreed leader %d ticks after every node stood again: %s", bound, s.Describe())
	}
	return nil
}
