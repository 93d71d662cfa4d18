package sim

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// BenchmarkElection measures one whole election in the simulator, from a cold
// cluster until every node agrees: the lowest-ranked node detects, which is
// the bully's worst case and the ring's single-initiator case. It reports
// the messages each election took.
//
//	go test ./election/sim -run '^$' -bench BenchmarkElection -benchmem -count 5
func BenchmarkElection(b *testing.B) {
	for _, algo := range []string{"ring", "bully"} {
		for _, n := range []int{3, 5, 16, 64, 128, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", algo, n), func(b *testing.B) {
				msgs := 0
				for b.Loop() {
					cost, err := MeasureElection(algo, n, false, election.NodeID(1))
					if err != nil {
						b.Fatal(err)
					}
					msgs = cost.Total()
				}
				b.ReportMetric(float64(msgs), "msgs/election")
			})
		}
	}
}
