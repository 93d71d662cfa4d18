package node

import (
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/electord/electord/config"
)

// A thousand named elections on five nodes, every node's app standing in
// all of them on one stream, with the product's timings: every node names
// the same leader and term in every election within the deadline. A pass
// that moves hundreds of elections queues a message per election for each
// peer; when those overflowed the per-peer send queue (256) and each
// overflow was reported to its election as a lost peer, the elections
// started again faster than they settled and never agreed.
func TestThousandNamedElectionsAgreeOnFiveNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 elections on 5 nodes")
	}
	k, nodes := 1000, 5
	if raceBuild() {
		// The race detector slows the five nodes several times over on two
		// cores: the race build checks the paths with fewer elections, the
		// plain build the scale.
		k = 200
	}
	deadline := 30 * time.Second
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			d := config.Default()
			c := newTunedCluster(t, algo, nodes, 0, nil, func(cfg *Config) {
				cfg.Tick, cfg.HeartbeatInterval, cfg.HeartbeatTimeout = d.Tick, d.HeartbeatInterval, d.HeartbeatTimeout
			})
			c.agree(deadline, 0)
			opts := shardNames(k)
			start := time.Now()
			c.campaignAll(opts)
			end := start.Add(deadline)
			for {
				left, why := 0, ""
				for _, o := range opts {
					var first LeaderInfo
					for id := range c.nodes {
						li, _ := c.nodes[id].ElectionLeader(o.Election)
						if !li.HasLeader() || (first.HasLeader() && (li.ID != first.ID || li.Term != first.Term)) {
							if why == "" {
								why = fmt.Sprintf("%s: node %d shows %d at %v, another %d at %v", o.Election, id, li.ID, li.Term, first.ID, first.Term)
							}
							left++
							break
						}
						first = li
					}
				}
				if left == 0 {
					t.Logf("%s: %d elections on %d nodes agreed %v after the campaigns opened", algo, k, nodes, time.Since(start).Round(time.Millisecond))
					return
				}
				if time.Now().After(end) {
					t.Fatalf("%s: %d of %d elections not agreed %v after the campaigns opened (first: %s)", algo, left, k, deadline, why)
				}
				time.Sleep(50 * time.Millisecond) // polls the views; the nodes wait on nothing here
			}
		})
	}
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "-race" {
				return st.Value == "true"
			}
		}
	}
	return false
}
