package integration

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
)

// TestMismatchedSettingsRefused (issue 12, item 7): a node whose cluster
// settings differ (another algorithm, a quorum size, or --preempt in a
// cluster without it: the rogue preempting node of the issue) joins a
// running bully cluster. It is refused by every member, stands down instead
// of leading a cluster of one, and the cluster's leader and term stay.
func TestMismatchedSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"algorithm", func(c *config.Config) { c.Algorithm = "ring" }, "algorithm: it runs bully, this node ring"},
		{"quorum", func(c *config.Config) { c.Quorum = 3 }, "quorum: it runs 0, this node 3"},
		{"preempt", func(c *config.Config) { c.Preempt, c.Priority = true, 100 }, "preempt: it runs false, this node true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, devcluster.Options{Nodes: 3, Algorithm: "bully"})
			l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
			tl := recordTimelines(t, c.Nodes)
			start := time.Now()

			cfg := devConfig(7, "bully", t.TempDir(), []string{c.Nodes[0].GossipAddr})
			tc.set(&cfg)
			logs := &lockedBuffer{}
			odd, err := daemon.Start(cfg, daemon.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatalf("starting the odd node: %v", err)
			}
			defer odd.Stop()
			eventually(t, 5*time.Second, "the odd node stands down", func() (bool, string) {
				st := odd.Node.Status()
				return st.Killed, fmt.Sprintf("killed=%v leader %d state %s", st.Killed, st.Leader.ID, st.Leader.State)
			})
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("the odd node's log does not name %q:\n%s", tc.want, logs.String())
			}
			// Several leader timeouts: no member admits it, nobody moves.
			for end := time.Now().Add(4 * config.DefaultHeartbeatTimeout); time.Now().Before(end); time.Sleep(pollInterval) {
				for _, d := range c.Nodes {
					for _, m := range d.Node.Members() {
						if m.ID == 7 {
							t.Fatalf("node %d lists the odd node: %+v", d.Config.ID, m)
						}
					}
				}
				if li := odd.Node.Leader(); li.Self {
					t.Fatalf("the odd node leads at %v", li.Term)
				}
			}
			for _, d := range c.Nodes {
				id := election.NodeID(d.Config.ID)
				for _, e := range tl.events(id) {
					if e.li.ID != l0.ID || e.li.Term != l0.Term {
						t.Fatalf("node %d's leadership changed: leader %d term %v\n%s", id, e.li.ID, e.li.Term, tl.describe(id, start))
					}
				}
			}
			// The seed it joined through refused it, and counted it.
			if c.Nodes[0].Node.Counters().Conflicts.Load() == 0 {
				t.Errorf("node %d, the odd node's seed, counted no conflict", c.Nodes[0].Config.ID)
			}
		})
	}
}
