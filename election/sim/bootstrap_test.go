package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestBootstrapExpect: a five-node cluster forms, and node 3 does not see
// nodes 4 and 5 yet (gossip has not reached it). Without BootstrapExpect
// node 3 elects a leader from its partial view (itself); with
// BootstrapExpect 5 no node ever follows 3, and once node 3 sees everyone
// the cluster agrees: with the bully on node 5, the leader the full cluster
// would choose; with the ring on the one nodes 1 and 2 (the only ones that
// see every member) elected, skipping the nodes that refused their
// Elections while bootstrapping.
func TestBootstrapExpect(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(algo, func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(*scenarioSeeds); seed++ {
				for _, expect := range []int{0, 5} {
					h := newHarness(t, Options{N: 5, Algorithm: algo, Seed: seed,
						Tune: func(c *election.Config) { c.BootstrapExpect = expect }})
					for _, o := range []election.NodeID{4, 5} {
						h.Cut(3, o)
						h.Cut(o, 3)
					}
					led3 := func() bool {
						for i := 1; i <= h.N(); i++ {
							if h.Node(election.NodeID(i)).Status().Leader == 3 {
								return true
							}
						}
						return false
					}
					const window = 300 // many leader timeouts and ring rounds
					if expect == 0 {
						// The control: the fault is real without the setting.
						h.until(window, "without BootstrapExpect, some node leads or follows node 3", led3)
						continue
					}
					h.never(window, "with BootstrapExpect 5, a node leads or follows node 3, elected from a partial view", led3)
					if algo == "ring" {
						// Nodes 3, 4 and 5 (each missing a member) refuse
						// Elections, and nodes 1 and 2, which see everyone,
						// elect between them; the others follow.
						h.Heal()
						h.agree(200, "after node 3 sees the whole cluster")
						continue
					}
					if !h.Node(3).Status().Bootstrapping {
						h.fatalf("node 3 sees %d members but stopped bootstrapping", h.Node(3).Status().Members)
					}
					h.Heal()
					h.agreeOn(200, 5, "after node 3 sees the whole cluster")
					if h.Node(3).Status().Bootstrapping {
						h.fatalf("node 3 still bootstrapping after the cluster formed")
					}
				}
			}
		})
	}
}
