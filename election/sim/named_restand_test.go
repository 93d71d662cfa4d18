package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

// TestNamedStandAgainNeverTakesBackAnOldTerm: node 2 leads "jobs" at term
// T for app b; b withdraws (node 2 hands over to node 3), and the messages
// that tell node 3 so are lost, so node 3 still follows node 2 at T. A new
// app stands through node 2 at once: its machine starts from the floor
// (term T, no leadership: the election's record was dropped with the last
// app) and asks the candidates who leads. Node 3 answers "node 2, at T".
// Taking that up would make node 2 lead at T again, for another app, with
// the fencing token b held (W1, W2). It must not: a term at or below the
// term a machine started from was minted before it ran (found by
// TestPropertyNamedElections, ring and bully seed 254, with Redial).
func TestNamedStandAgainNeverTakesBackAnOldTerm(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(algo, func(t *testing.T) {
			ns := newNamedWith(t, algo, Mends{})
			var trace []string
			ns.Trace = func(f string, a ...any) { trace = append(trace, sprintf(f, a...)) }
			fail := func(format string, a ...any) {
				t.Helper()
				t.Fatalf(sprintf(format, a...)+"\ntrace:\n%s", join(trace))
			}
			apps := map[election.NodeID]int64{1: 0, 2: 5, 3: 1} // node 2 ranks first, then 3
			for _, id := range []election.NodeID{2, 1, 3} {     // node 2 first: it leads
				if _, err := ns.Stand(id, "jobs", "", apps[id]); err != nil {
					t.Fatal(err)
				}
				if err := ns.Run(3); err != nil {
					t.Fatal(err)
				}
			}
			ok, err := ns.RunUntil(NamedBound(3), func() bool { l, _, ok := ns.AgreedNamed("jobs"); return ok && l == 2 })
			if err != nil || !ok {
				fail("node 2 does not lead: %v %s", err, ns.DescribeNamed("jobs"))
			}
			_, term, _ := ns.AgreedNamed("jobs")
			ns.Hook = func(m election.Message) bool { return !(m.From == 2 && m.To == 3) }
			b := ns.Queue(2, "jobs")[0].ID
			if err := ns.Withdraw(2, b); err != nil {
				t.Fatal(err)
			}
			if err := ns.Run(1); err != nil {
				fail("%v", err)
			}
			if st := ns.Machine(3, "jobs").Status(); st.Leader != 2 || st.LeaderTerm != term {
				fail("node 3 no longer follows node 2 at %v: %+v", term, st)
			}
			ns.Hook = nil
			if _, err := ns.Stand(2, "jobs", "", 5); err != nil {
				t.Fatal(err)
			}
			// The checker fails the run on W1/W2; agreement comes at a new term.
			ok, err = ns.RunUntil(NamedBound(3), func() bool { _, _, ok := ns.AgreedNamed("jobs"); return ok })
			if err != nil || !ok {
				fail("after standing again: agreed %v, %v: %s", ok, err, ns.DescribeNamed("jobs"))
			}
			if _, t2, _ := ns.AgreedNamed("jobs"); t2 <= term {
				fail("agreed at %v, not above %v", t2, term)
			}
		})
	}
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

func join(lines []string) string { return strings.Join(lines, "\n") }
