package history

import (
	"testing"
	"time"
)

// TestNamedWithdrawnLeads: a node whose app withdrew may claim for
// WithdrawnMax, counted from the later of the withdrawal and the node's
// resume; after that each withdrawal is one violation.
func TestNamedWithdrawnLeads(t *testing.T) {
	l := term(1, 1)
	apps := []App{{At: at(0), Node: 1, Standing: true}, {At: at(1000), Node: 1}}
	cfg := Config{Nodes: 3, Named: true, WithdrawnMax: 500 * time.Millisecond}
	ok := History{Obs: []Obs{claim(1, l, 900, 901), claim(1, l, 1400, 1401)}, Apps: apps}
	if r := Check(cfg, ok); len(only(r, RuleWithdrawnLeads)) != 0 {
		t.Errorf("claims within the allowance: %v", r.Violations)
	}
	late := History{Obs: []Obs{claim(1, l, 1600, 1601), claim(1, l, 1700, 1701)}, Apps: apps}
	if r := Check(cfg, late); len(only(r, RuleWithdrawnLeads)) != 1 {
		t.Errorf("claims 600 and 700 ms after the withdrawal: %v, want one %s", r.Violations, RuleWithdrawnLeads)
	}
	// Paused from 900 to 1500: the allowance counts from the resume.
	paused := topo(900, 3)
	paused.Up[1] = false
	resumed := History{Obs: []Obs{claim(1, l, 1600, 1601)}, Apps: apps, Topo: []Topology{topo(0, 3), paused, topo(1500, 3)}}
	if r := Check(cfg, resumed); len(only(r, RuleWithdrawnLeads)) != 0 {
		t.Errorf("a claim 100 ms after the node resumed: %v", r.Violations)
	}
	// The default election (no Named) has no such rule.
	if r := Check(Config{Nodes: 3}, late); len(only(r, RuleWithdrawnLeads)) != 0 {
		t.Errorf("default election judged for withdrawals: %v", r.Violations)
	}
}

// TestNamedDeadCandidate: the leader agreed after a heal must have an app
// standing.
func TestNamedDeadCandidate(t *testing.T) {
	l := term(1, 2)
	h := History{Obs: agreed3(2, l, 100), Heals: []Heal{{At: at(50), What: "x"}},
		Apps: []App{{At: at(0), Node: 2, Standing: true}}}
	cfg := Config{Nodes: 3, Named: true}
	if r := Check(cfg, h); len(r.Violations) != 0 {
		t.Errorf("a standing leader: %v", r.Violations)
	}
	h.Apps = append(h.Apps, App{At: at(60), Node: 2})
	if r := Check(cfg, h); len(only(r, RuleDeadCandidate)) != 1 {
		t.Errorf("a withdrawn leader agreed: %v, want one %s", r.Violations, RuleDeadCandidate)
	}
}

// TestNamedTermsOfLeadersOnly: in a named election a node that knows no
// leader reports no term, so only answers naming a leader count for
// term-monotonic; the default election counts every answer.
func TestNamedTermsOfLeadersOnly(t *testing.T) {
	h := History{Obs: []Obs{follows(3, 1, term(2, 1), 0, 1), follows(3, 0, 0, 10, 11), follows(3, 2, term(3, 2), 20, 21)}}
	if r := Check(Config{Nodes: 3, Named: true}, h); len(only(r, RuleTermMonotonic)) != 0 {
		t.Errorf("named: %v", r.Violations)
	}
	if r := Check(Config{Nodes: 3}, h); len(only(r, RuleTermMonotonic)) != 1 {
		t.Errorf("default: %v, want one %s", r.Violations, RuleTermMonotonic)
	}
	h.Obs = append(h.Obs, follows(3, 1, term(2, 1), 30, 31))
	if r := Check(Config{Nodes: 3, Named: true}, h); len(only(r, RuleTermMonotonic)) != 1 {
		t.Errorf("named, a leader's term going back: %v, want one %s", r.Violations, RuleTermMonotonic)
	}
}

// TestPlainOverlaps: without quorum, two claims at overlapping moments are
// reported as Overlaps, not violations, and marked when the network was
// whole.
func TestPlainOverlaps(t *testing.T) {
	cut := topo(0, 3, [2]int{1, 2}, [2]int{2, 1})
	h := History{Obs: []Obs{claim(1, term(1, 1), 10, 20), claim(2, term(2, 2), 15, 25), claim(1, term(1, 1), 110, 120), claim(3, term(3, 3), 2115, 2125), claim(1, term(1, 1), 2110, 2120)},
		Topo: []Topology{cut, topo(100, 3)}}
	r := Check(Config{Nodes: 3}, h)
	if len(r.Violations) != 0 || len(r.Overlaps) != 2 || r.OverlapsWhole != 1 || r.OverlapsCalm != 1 {
		t.Errorf("violations %v, overlaps %v (%d whole, %d calm), want none, 2 (1 whole, 1 calm)", r.Violations, r.Overlaps, r.OverlapsWhole, r.OverlapsCalm)
	}
	// The whole one began 2 s after the heal at 100 ms: within a 2.5 s
	// settle time it is the cut's aftermath, not calm. A whole topology
	// recorded again (a restart's second record) does not restart it.
	h.Topo = append(h.Topo, topo(1000, 3))
	if r := Check(Config{Nodes: 3, Settle: 2500 * time.Millisecond}, h); r.OverlapsWhole != 1 || r.OverlapsCalm != 0 {
		t.Errorf("settle 2.5 s: %d whole, %d calm, want 1, 0", r.OverlapsWhole, r.OverlapsCalm)
	}
	if r := Check(Config{Nodes: 3, Settle: 1900 * time.Millisecond}, h); r.OverlapsWhole != 1 || r.OverlapsCalm != 1 {
		t.Errorf("settle 1.9 s: %d whole, %d calm, want 1, 1", r.OverlapsWhole, r.OverlapsCalm)
	}
	if r := Check(Config{Nodes: 3, Quorum: 3}, h); len(only(r, RuleTwoClaims)) != 2 || len(r.Overlaps) != 0 {
		t.Errorf("quorum: %v, overlaps %v", r.Violations, r.Overlaps)
	}
}
