package history

import (
	"testing"
	"time"
)

// TestNamedStartingAppMayStand: a node may claim, and be agreed on, while
// its new app is starting (App.Starting): the node registered the
// candidacy before the app's word that it stands reached the recorder. The
// first history is the long ring run's: node 2 restarted (its app's stream
// closed at 1000, the node up again at 1450), its new app started at 2000
// and said it stood only at 6900, after node 2 had claimed at 6850.
// A start that fails is a withdrawal from its end.
func TestNamedStartingAppMayStand(t *testing.T) {
	l := term(1820, 2)
	restarted := []Topology{topo(0, 3), topo(900, 3), topo(1450, 3)}
	restarted[1].Up[2] = false
	cfg := Config{Nodes: 3, Named: true, WithdrawnMax: 500 * time.Millisecond}
	apps := []App{{At: at(0), Node: 2, Standing: true}, {At: at(1000), Node: 2},
		{At: at(2000), Node: 2, Starting: true}, {At: at(6900), Node: 2, Standing: true}}
	h := History{Obs: []Obs{claim(2, l, 6850, 6851)}, Apps: apps, Topo: restarted}
	if r := Check(cfg, h); len(only(r, RuleWithdrawnLeads)) != 0 {
		t.Errorf("a claim while the node's new app was starting: %v", r.Violations)
	}
	// Agreed on while its app starts: not a dead candidate.
	h = History{Obs: agreed3(2, l, 6850), Heals: []Heal{{At: at(6000), What: "rolling-restart of node 2"}}, Apps: apps, Topo: restarted}
	if r := Check(cfg, h); len(only(r, RuleDeadCandidate)) != 0 {
		t.Errorf("agreed on node 2 while its app was starting: %v", r.Violations)
	}
	// The start failed at 2300 (the app exited before it stood): a claim
	// 1300 ms later is a withdrawn leader's.
	failed := []App{{At: at(0), Node: 2, Standing: true}, {At: at(1000), Node: 2},
		{At: at(2000), Node: 2, Starting: true}, {At: at(2300), Node: 2}}
	h = History{Obs: []Obs{claim(2, l, 2700, 2701), claim(2, l, 3600, 3601)}, Apps: failed, Topo: restarted}
	r := Check(cfg, h)
	if vs := only(r, RuleWithdrawnLeads); len(vs) != 1 || !vs[0].At.Equal(at(3600)) {
		t.Errorf("claims 400 and 1300 ms after a failed start: %v, want one %s at 3600 ms", r.Violations, RuleWithdrawnLeads)
	}
}
