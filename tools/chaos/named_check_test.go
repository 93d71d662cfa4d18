package chaos

import (
	"net/http"
	"testing"
	"time"

	"github.com/electord/electord/tools/history"
)

// TestNamedQuorumTwoClaims: two nodes claiming a named election at
// overlapping moments, every node up and no link cut, is a two-claims
// violation when the run's quorum is a majority of the nodes (every node
// votes: one leader at a time, as the default election), and an Overlap
// (the plain rule) without quorum or with a quorum whose majority is not
// one of the nodes.
func TestNamedQuorumTwoClaims(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	claim := func(n int, term uint64, from, to int) history.Obs {
		return history.Obs{Node: n, Kind: history.Self, Sent: at(from), Recv: at(to), Code: http.StatusOK,
			Term: term, Self: true, State: "leader"}
	}
	whole := history.Topology{At: at(0), Up: make([]bool, 6), Cut: make([][]bool, 6)}
	for i := range whole.Cut {
		whole.Cut[i] = make([]bool, 6)
		whole.Up[i] = i > 0
	}
	h := history.History{Obs: []history.Obs{claim(1, 1<<16|1, 100, 110), claim(2, 2<<16|2, 105, 115)},
		Topo: []history.Topology{whole}}
	for _, c := range []struct {
		quorum               int
		violations, overlaps int
	}{
		{5, 1, 0}, // a majority of 5 is 3: one leader at a time
		{4, 1, 0}, // 3 of 5 as well
		{3, 0, 1}, // 2 of 5: two sides may each hold one
		{0, 0, 1}, // plain mode
	} {
		r := history.Check(namedConfig(Options{Nodes: 5, Quorum: c.quorum}), h)
		if got := r.Rules()[history.RuleTwoClaims]; got != c.violations || len(r.Overlaps) != c.overlaps {
			t.Errorf("quorum %d: %d %s violations, %d overlaps; want %d, %d (%v)",
				c.quorum, got, history.RuleTwoClaims, len(r.Overlaps), c.violations, c.overlaps, r.Violations)
		}
	}
}
