package sim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// withdraw makes node id stop standing (StateMachine.Stand(false)).
func withdraw(sm election.StateMachine) error { sm.Stand(false); return nil }

// stand makes node id stand again.
func stand(sm election.StateMachine) error { sm.Stand(true); return nil }

// neverLeads runs ticks ticks and fails if node id leads on any of them.
func neverLeads(t *testing.T, s *Sim, id election.NodeID, ticks int) {
	t.Helper()
	for range ticks {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		if s.Up(id) && s.Node(id).Status().Role == election.RoleLeader {
			t.Fatalf("tick %d: node %d leads while it does not stand: %s", s.Now(), id, s.Describe())
		}
	}
}

// fiveLedBy5 starts a 5-node simulation with opts and runs it until node 5
// (the highest) leads.
func fiveLedBy5(t *testing.T, opts Options) *Sim {
	t.Helper()
	opts.N = 5
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RunUntil(1000, func() bool { l, _, ok := s.Agreed(); return ok && l == 5 }); !ok || err != nil {
		t.Fatalf("node 5 does not lead: %v %s", err, s.Describe())
	}
	return s
}

// TestWithdrawnNodeHandsOverAndNeverLeads: a leader that stops standing
// hands its leadership to another node within a few hops (the resign
// path), and never leads again while it does not stand: not when the new
// leader transfers the leadership to it, nor when every other node is gone.
// Standing again, it follows the sitting leader (sticky).
func TestWithdrawnNodeHandsOverAndNeverLeads(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		for _, quorum := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/quorum=%v", algo, quorum), func(t *testing.T) {
				s := fiveLedBy5(t, Options{Algorithm: algo, Quorum: quorum, Seed: 7})
				if err := s.Do(5, withdraw); err != nil {
					t.Fatal(err)
				}
				start := s.Now()
				if ok, err := s.RunUntil(200, func() bool { l, _, ok := s.Agreed(); return ok && l != 5 }); !ok || err != nil {
					t.Fatalf("no other leader after node 5 withdrew: %v %s", err, s.Describe())
				}
				t.Logf("another node leads %d ticks after the leader withdrew", s.Now()-start)
				if st := s.Node(5).Status(); !st.Withdrawn || !st.RefusesElections {
					t.Fatalf("node 5's status does not say it withdrew: %+v", st)
				}
				neverLeads(t, s, 5, 300)

				// The leader heard it say so in its heartbeats: a transfer to
				// it is refused. (One it had not heard yet is passed back:
				// TestWithdrawnWithPreempt.)
				l, _, _ := s.Agreed()
				if err := s.Do(l, func(sm election.StateMachine) error { return sm.Transfer(5) }); !errors.Is(err, election.ErrNotStanding) {
					t.Fatalf("a transfer to the withdrawn node: %v, want ErrNotStanding", err)
				}

				// Standing again: sticky, the sitting leader stays.
				l, term, _ := s.Agreed()
				if err := s.Do(5, stand); err != nil {
					t.Fatal(err)
				}
				if err := s.Run(300); err != nil {
					t.Fatal(err)
				}
				if l2, term2, ok := s.Agreed(); !ok || l2 != l || term2 != term {
					t.Fatalf("the leader changed when node 5 stood again (was %d at %v): %s", l, term, s.Describe())
				}

				// Withdrawn and alone: it never leads.
				if err := s.Do(5, withdraw); err != nil {
					t.Fatal(err)
				}
				for id := election.NodeID(1); id <= 4; id++ {
					s.Crash(id)
				}
				neverLeads(t, s, 5, 1000)
				// Standing again, alone, it leads (outside quorum mode, where
				// one of five is no majority).
				if err := s.Do(5, stand); err != nil {
					t.Fatal(err)
				}
				if quorum {
					return
				}
				if ok, err := s.RunUntil(1000, func() bool { return s.Node(5).Status().Role == election.RoleLeader }); !ok || err != nil {
					t.Fatalf("node 5 does not lead alone after standing again: %v %s", err, s.Describe())
				}
			})
		}
	}
}

// TestWithdrawnFollowerDoesNotCampaign: when the leader crashes, a node
// that does not stand leaves the election to the others, and follows the
// winner.
func TestWithdrawnFollowerDoesNotCampaign(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			s := fiveLedBy5(t, Options{Algorithm: algo, Seed: 11})
			if err := s.Do(4, withdraw); err != nil {
				t.Fatal(err)
			}
			s.Crash(5)
			if ok, err := s.RunUntil(500, func() bool { l, _, ok := s.Agreed(); return ok && l == 3 }); !ok || err != nil {
				t.Fatalf("node 3 (the highest that stands) does not lead: %v %s", err, s.Describe())
			}
			neverLeads(t, s, 4, 300)
			if st := s.Node(4).Status(); st.Leader != 3 {
				t.Fatalf("node 4 does not follow node 3: %+v", st)
			}
		})
	}
}

// TestWithdrawnWithPreempt: with Preempt, a leader does not hand over to a
// higher-ranked member that said it does not stand (its heartbeats, or the
// TimeoutNow with which it passed a leadership on), so the leadership
// settles instead of bouncing between the leader and that member; once
// the member stands again, its next heartbeat says so and the leader hands
// over to it.
func TestWithdrawnWithPreempt(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		for _, quorum := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/quorum=%v", algo, quorum), func(t *testing.T) {
				s := fiveLedBy5(t, Options{Algorithm: algo, Quorum: quorum, Preempt: true, Seed: 5})
				if err := s.Do(5, withdraw); err != nil {
					t.Fatal(err)
				}
				if ok, err := s.RunUntil(200, func() bool { l, _, ok := s.Agreed(); return ok && l != 5 }); !ok || err != nil {
					t.Fatalf("no other leader after node 5 withdrew: %v %s", err, s.Describe())
				}
				// Settled: at most one more change (a leader that had not
				// heard from node 5 yet hands over to it once), then none.
				if err := s.Run(100); err != nil {
					t.Fatal(err)
				}
				l, term, ok := s.Agreed()
				if !ok {
					t.Fatalf("no agreed leader: %s", s.Describe())
				}
				neverLeads(t, s, 5, 500)
				if l2, term2, ok := s.Agreed(); !ok || l2 != l || term2 != term {
					t.Fatalf("the leadership moved while node 5 did not stand (preempt): %d@%v -> %d@%v %s", l, term, l2, term2, s.Describe())
				}
				// Standing again: preempt hands it the leadership.
				if err := s.Do(5, stand); err != nil {
					t.Fatal(err)
				}
				if ok, err := s.RunUntil(200, func() bool { l, _, ok := s.Agreed(); return ok && l == 5 }); !ok || err != nil {
					t.Fatalf("node 5 does not lead again after standing, with preempt: %v %s", err, s.Describe())
				}
			})
		}
	}
}
