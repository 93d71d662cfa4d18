package integration

import (
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
)

// TestBootstrapExpect: with bootstrap-expect 3, the first two nodes of a
// forming cluster elect no one (real gossip and gRPC); the third makes the
// count and the three agree on node 3, the leader the whole cluster would
// choose. Without the setting two nodes elect at once (the control).
func TestBootstrapExpect(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 2, Algorithm: alg, BootstrapExpect: 3})

		// Hold for several leader timeouts plus jitter: nobody may lead.
		hold := 6 * config.DefaultHeartbeatTimeout
		for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(pollInterval) {
			for _, d := range c.Nodes {
				if li := d.Node.Leader(); li.HasLeader() {
					t.Fatalf("node %d shows leader %d (term %v) with 2 of the 3 expected members", d.Config.ID, li.ID, li.Term)
				}
			}
		}
		eventually(t, 5*time.Second, "both nodes see each other", func() (bool, string) {
			ok := true
			for _, d := range c.Nodes {
				ok = ok && len(d.Node.Status().Members) == 2
			}
			return ok, describeViews(c.Nodes)
		})

		cfg := devConfig(3, alg, t.TempDir(), []string{c.Nodes[0].GossipAddr})
		cfg.PeerServer = peerServerOf(t)
		cfg.BootstrapExpect = 3
		d3, err := daemon.Start(cfg, daemon.Options{Logger: testLogger("node-3")})
		if err != nil {
			t.Fatalf("starting node 3: %v", err)
		}
		t.Cleanup(func() { d3.Stop() })
		all := append(c.Nodes[:2:2], d3)
		li := waitAgreement(t, all, 10*time.Second, "the three agree once the third joined")
		if li.ID != 3 {
			t.Fatalf("agreed on node %d (term %v), want node 3", li.ID, li.Term)
		}

		// The control: the same two nodes without the setting elect.
		c2 := startCluster(t, devcluster.Options{Nodes: 2, Algorithm: alg, BootstrapExpect: -1})
		waitAgreement(t, c2.Nodes, 10*time.Second, "two nodes without bootstrap-expect elect")
	})
}
