package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestMessageComplexity asserts the exact message counts of the canonical
// cases against theory, and logs the table in docs/ALGORITHMS.md
// (go test ./election/sim -run MessageComplexity -v).
func TestMessageComplexity(t *testing.T) {
	var table strings.Builder
	fmt.Fprintln(&table, "| case | n | theory | measured | Election | Answer | Coordinator | ticks to agree |")
	fmt.Fprintln(&table, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range Cases {
		for _, n := range []int{3, 5, 8, 16, 32, 64, 128} {
			cost, err := MeasureElection(c.Algorithm, n, false, c.Initiators(n)...)
			if err != nil {
				t.Fatalf("%s n=%d: %v", c.Name, n, err)
			}
			if want := Theory(c.Name, n); cost.Total() != want {
				t.Errorf("%s n=%d: %d messages (%+v), theory says %d", c.Name, n, cost.Total(), cost, want)
			}
			if int(cost.Leader) != n {
				t.Errorf("%s n=%d: leader %d, want the highest, %d", c.Name, n, cost.Leader, n)
			}
			fmt.Fprintf(&table, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", c.Name, n, Theory(c.Name, n), cost.Total(),
				cost.Elections, cost.Answers, cost.Coordinators, cost.Ticks)
		}
	}
	t.Log("\n" + table.String())
}

// TestMessageComplexityQuorum logs what quorum mode adds (acks and the
// confirmation round) to the same cases; it asserts the bully's exact cost.
func TestMessageComplexityQuorum(t *testing.T) {
	for _, c := range Cases {
		for _, n := range []int{3, 5, 8} {
			cost, err := MeasureElection(c.Algorithm, n, true, c.Initiators(n)...)
			if err != nil {
				t.Fatalf("%s n=%d quorum: %v", c.Name, n, err)
			}
			// Bully in quorum mode: proposal (n-1), acks (n-1), confirmation (n-1).
			if c.Name == "bully/best" && cost.Total() != 3*(n-1) {
				t.Errorf("%s n=%d quorum: %d messages (%+v), want 3(n-1)=%d", c.Name, n, cost.Total(), cost, 3*(n-1))
			}
			t.Logf("quorum %s n=%d: total=%d %+v", c.Name, n, cost.Total(), cost)
		}
	}
}
