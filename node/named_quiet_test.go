package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// In plain mode an election at rest is not published again on every
// heartbeat: its machines' heartbeats and ticks show nothing new, so the
// node publishes it only when something changes. 3 nodes, 20 elections,
// an app on each node in each, the product's timings; after agreement,
// 2 s at rest (10 heartbeat intervals) publish next to nothing, where each
// heartbeat published its election before (about 5 a second per election
// per node). A change still shows at once: the leading app leaves and every
// node shows the next leader.
func TestNamedElectionsAtRestArePublishedNoMore(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newTunedCluster(t, algo, 3, 0, nil, func(cfg *Config) {
				cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 200*time.Millisecond, 600*time.Millisecond
			})
			c.agree(10*time.Second, 0)
			const k = 20
			apps := map[string]map[election.NodeID]*Candidacy{}
			for i := range k {
				name := fmt.Sprintf("rest-%02d", i)
				apps[name] = map[election.NodeID]*Candidacy{}
				for id := election.NodeID(1); id <= 3; id++ {
					a, err := c.nodes[id].Campaign(context.Background(), name, fmt.Sprintf("app-%d", id), 0)
					if err != nil {
						t.Fatal(err)
					}
					apps[name][id] = a
					t.Cleanup(func() { a.Close() })
				}
			}
			var li LeaderInfo
			for i := range k {
				li = c.agreeNamed(fmt.Sprintf("rest-%02d", i), 0, 10*time.Second)
			}
			time.Sleep(time.Second) // the candidacies' resends settle
			// A window in which the host or a node loop stood still is
			// not judged: a stall past the heartbeat timeout is found
			// and repaired by design, which publishes.
			before := map[election.NodeID]uint64{}
			if !c.stillWindows(t, 4, 400*time.Millisecond, func() {
				for id, nd := range c.nodes {
					before[id] = nd.named.publishes.Load()
				}
				time.Sleep(2 * time.Second)
			}) {
				t.Skip("no window the host left calm: nothing judged")
			}
			for id, nd := range c.nodes {
				// Each heartbeat and its answer published the election on
				// both ends: 20 elections × 10 intervals × 2 or more.
				got := nd.named.publishes.Load() - before[id]
				t.Logf("node %d: %d publishes in 2 s at rest", id, got)
				if got > k {
					t.Errorf("node %d published %d times in 2 s at rest (20 elections)", id, got)
				}
			}
			// A change is shown: the last election's leading app leaves.
			name := fmt.Sprintf("rest-%02d", k-1)
			apps[name][li.ID].Close()
			next := c.agreeNamed(name, li.Term, 10*time.Second)
			if next.ID == li.ID {
				t.Fatalf("%s: node %d still leads after its app left", name, li.ID)
			}
		})
	}
}
