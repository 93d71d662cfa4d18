package node

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/electord/electord/config"
)

// The Go heap a node spends per named election, measured in process: five
// nodes with the product's timings, every node's app standing in all of
// them on one stream, agreed and at rest. It reports (bytes per election
// per node: the heap after a GC, less the heap before the campaigns, over
// 5 × k) and sets no bound: the figure belongs to the benchmarks
// (electbench shards measures real processes). ELECTORD_NAMED_MEMORY is
// the number of elections (1: the default, 1,000); ELECTORD_NAMED_MEMPROFILE
// names a file for the heap profile at rest.
func TestNamedMemoryPerElection(t *testing.T) {
	k, err := strconv.Atoi(os.Getenv("ELECTORD_NAMED_MEMORY"))
	if err != nil || k < 1 {
		t.Skip("a measurement: set ELECTORD_NAMED_MEMORY=1 or a number of elections (and ELECTORD_NAMED_MEMPROFILE=FILE for a heap profile)")
	}
	if k == 1 {
		k = 1000
	}
	if os.Getenv("ELECTORD_NAMED_MEMPROFILE") != "" {
		runtime.MemProfileRate = 64 // every object of the elections' state, near enough
	}
	nodes := 5
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			d := config.Default()
			c := newTunedCluster(t, algo, nodes, 0, nil, func(cfg *Config) {
				cfg.Tick, cfg.HeartbeatInterval, cfg.HeartbeatTimeout = d.Tick, d.HeartbeatInterval, d.HeartbeatTimeout
			})
			c.agree(30*time.Second, 0)
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			opts := shardNames(k)
			c.campaignAll(opts)
			end := time.Now().Add(120 * time.Second)
			for left := k; left > 0; {
				left = c.notAgreed(opts)
				if left > 0 && time.Now().After(end) {
					t.Fatalf("%d of %d elections not agreed", left, k)
				}
				time.Sleep(100 * time.Millisecond) // polls the views
			}
			time.Sleep(3 * time.Second) // at rest: a few heartbeat rounds
			runtime.GC()
			runtime.ReadMemStats(&m1)
			per := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / int64(k*nodes)
			t.Logf("%s: %d elections × %d nodes at rest: heap %d → %d B, %d B per election per node", algo, k, nodes, m0.HeapAlloc, m1.HeapAlloc, per)
			if f := os.Getenv("ELECTORD_NAMED_MEMPROFILE"); f != "" {
				runtime.GC() // the profile shows the heap as of the cycle before the last
				out, err := os.Create(f + "." + algo)
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// notAgreed counts the elections of opts on which the nodes do not all name
// one leader at one term.
func (c *cluster) notAgreed(opts []CampaignOptions) int {
	left := 0
	for _, o := range opts {
		var first LeaderInfo
		for id := range c.nodes {
			li, _ := c.nodes[id].ElectionLeader(o.Election)
			if !li.HasLeader() || (first.HasLeader() && (li.ID != first.ID || li.Term != first.Term)) {
				left++
				break
			}
			first = li
		}
	}
	return left
}
