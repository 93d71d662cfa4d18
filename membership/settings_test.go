package membership

import (
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

func withSettings(t *testing.T, id election.NodeID, name string, st Settings) *testNode {
	t.Helper()
	return startWith(t, id, func(c *Config) { c.Settings, c.Self.Name = st, name })
}

// TestDifferentSettingsAreRefused: a node whose cluster settings differ
// joins a two-node cluster. Its join fails naming the setting and both
// values; the members never admit it and log why; it has no member and
// meets a cluster that runs other settings, so it is told to stand down.
func TestDifferentSettingsAreRefused(t *testing.T) {
	bully := Settings{Algorithm: "bully", Quorum: 3}
	for _, tc := range []struct {
		name string
		odd  Settings
		want string
	}{
		{"algorithm", Settings{Algorithm: "ring", Quorum: 3}, "algorithm: it runs bully, this node ring"},
		{"quorum", Settings{Algorithm: "bully", Quorum: 0}, "quorum: it runs 3, this node 0"},
		{"preempt", Settings{Algorithm: "bully", Quorum: 3, Preempt: true}, "preempt: it runs false, this node true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := withSettings(t, 1, "a", bully)
			b := withSettings(t, 2, "b", bully)
			b.join(a.LocalAddr())
			a.wait("join of b", is(Join, 2), nil)
			b.wait("join of a", is(Join, 1), nil)

			odd := withSettings(t, 3, "odd", tc.odd)
			_, err := odd.Join([]string{a.LocalAddr()})
			if err == nil || !strings.Contains(err.Error(), ErrSettingsDiffer.Error()) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the odd node's join: %v, want a refusal naming %q", err, tc.want)
			}
			ev := odd.wait("its own refusal", func(ev Event) bool { return ev.Type == Conflict && ev.Yield }, about(1, Join))
			if !strings.Contains(ev.Detail, tc.want) {
				t.Errorf("the odd node's conflict %q does not name %q", ev.Detail, tc.want)
			}
			if got := odd.Members(); len(got) != 1 {
				t.Errorf("the odd node admitted %v", ids(got))
			}
			// The members refuse it: a conflict, and never a Join.
			ev = a.wait("refusal of the odd node", is(Conflict, 3), about(3, Join))
			if ev.Yield || !strings.Contains(ev.Detail, "cluster settings differ") {
				t.Errorf("member a: conflict %+v", ev)
			}
			if !a.logs.find("ERROR", "cluster settings differ") {
				t.Error("member a logged no error naming the settings")
			}
			if got := ids(a.Members()); len(got) != 2 || a.RefusedSettings() == 0 {
				t.Errorf("member a: members %v, refused %d", got, a.RefusedSettings())
			}
			// The odd node also gossips to b directly: still refused.
			if _, err := odd.Join([]string{b.LocalAddr()}); err == nil {
				t.Error("a join through b was let in")
			}
			if got := ids(b.Members()); len(got) != 2 {
				t.Errorf("member b admitted %v", got)
			}
		})
	}
}

// TestTwoLoneNodesWithDifferentSettingsDoNotYield: neither of two nodes
// that have no members can tell which is misconfigured; both refuse the
// other and neither stands down.
func TestTwoLoneNodesWithDifferentSettingsDoNotYield(t *testing.T) {
	a := withSettings(t, 1, "a", Settings{Algorithm: "bully"})
	b := withSettings(t, 2, "b", Settings{Algorithm: "ring"})
	if _, err := b.Join([]string{a.LocalAddr()}); err == nil {
		t.Fatal("join let a node with other settings in")
	}
	for _, n := range []*testNode{a, b} {
		other := election.NodeID(3) - n.cfg.Self.ID
		ev := n.wait("refusal", func(ev Event) bool { return ev.Type == Conflict }, about(other, Join))
		if ev.Yield {
			t.Errorf("node %s stands down: %+v", n.name, ev)
		}
	}
}
