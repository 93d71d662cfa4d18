package integration

import (
	"context"
	"testing"
	"time"

	"github.com/electord/electord/daemon/devcluster"
)

// TestDevClusterKillReviveNodeOne: in `electord dev --nodes 3`,
// `electctl kill 1; electctl revive 1` used to leave node 1 leading alone
// for good while nodes 2 and 3 kept their leader: node 1 had no gossip seed
// (the others joined it), and the others rejoined nobody while not alone
// (issue 10). Now every dev node is seeded with the others, and every node
// joins again the members it knew that are missing, so the three agree on
// one leader within seconds, and keep agreeing.
func TestDevClusterKillReviveNodeOne(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 3, Algorithm: alg})
		waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		one := nodeByID(t, c, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := one.Node.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		waitAgreement(t, without(c.Nodes, 1), 10*time.Second, "nodes 2 and 3 agree with node 1 killed")
		if err := one.Node.Revive(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		li := waitAgreement(t, c.Nodes, 5*time.Second, "all three agree after node 1 is revived")
		t.Logf("agreed on node %d, term %v, %v after the revive", li.ID, li.Term, time.Since(start).Round(time.Millisecond))
		// And it holds: node 1 is not left leading alone once gossip settles.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			leaders := 0
			for _, d := range c.Nodes {
				if d.Node.Leader().Self {
					leaders++
				}
			}
			if leaders > 1 {
				t.Fatalf("%d nodes lead at once after the revive: %s", leaders, describeViews(c.Nodes))
			}
		}
		if got, ok := agreement(c.Nodes); !ok || got.ID != li.ID {
			t.Fatalf("agreement on node %d did not hold: %s", li.ID, describeViews(c.Nodes))
		}
	})
}
