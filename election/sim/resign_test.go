package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestBullyResignOfTheTopNodeDoesNotWaitForAnAnswer: when the highest node
// resigns, the node it hands the election to must not wait out the answer
// timeout for the resigner (which stays silent); it leads within a few hops.
func TestBullyResignOfTheTopNodeDoesNotWaitForAnAnswer(t *testing.T) {
	s, err := New(Options{N: 5, Algorithm: "bully", Seed: 3, Tune: func(c *election.Config) { c.AnswerTimeoutTicks = 50 }})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RunUntil(300, func() bool { l, _, ok := s.Agreed(); return ok && l == 5 }); !ok || err != nil {
		t.Fatalf("no leader: %v %s", err, s.Describe())
	}
	if err := s.Do(5, election.StateMachine.Resign); err != nil {
		t.Fatal(err)
	}
	start := s.Now()
	ok, err := s.RunUntil(10, func() bool { l, _, ok := s.Agreed(); return ok && l == 4 })
	if err != nil || !ok {
		t.Fatalf("node 4 did not lead within 10 ticks of the resign (answer timeout is 50): %v %s", err, s.Describe())
	}
	t.Logf("node 4 leads %d ticks after node 5 resigned", s.Now()-start)
}
