package node

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
)

// benchElections is the number of elections a named benchmark runs:
// ELECTORD_BENCH_ELECTIONS, default 1,000.
func benchElections() int {
	if v, err := strconv.Atoi(os.Getenv("ELECTORD_BENCH_ELECTIONS")); err == nil && v > 0 {
		return v
	}
	return 1000
}

// restingNamedCluster starts five nodes at the product's timings, has every
// node's app stand in k elections on one stream (with the placement
// ELECTORD_BENCH_PLACEMENT names, default sticky), and returns once every
// node agrees on every election: the cluster, the elections, and how long
// agreement took from the campaigns opening. ELECTORD_BENCH_OBSERVERS=N
// leaves the app of the last N nodes out: those nodes stand in nothing and
// only observe.
func restingNamedCluster(b testing.TB, algo string, k int) (*cluster, []CampaignOptions, time.Duration) {
	d := config.Default()
	c := newTunedCluster(b, algo, 5, 0, nil, func(cfg *Config) {
		cfg.Tick, cfg.HeartbeatInterval, cfg.HeartbeatTimeout = d.Tick, d.HeartbeatInterval, d.HeartbeatTimeout
	})
	c.agree(30*time.Second, 0)
	opts := shardNames(k)
	for i := range opts {
		opts[i].Placement = os.Getenv("ELECTORD_BENCH_PLACEMENT")
	}
	observers, _ := strconv.Atoi(os.Getenv("ELECTORD_BENCH_OBSERVERS"))
	start := time.Now()
	for id := 1; id <= 5-observers; id++ {
		s, err := c.nodes[election.NodeID(id)].CampaignMany(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
	}
	for left := k; left > 0; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 120*time.Second {
			b.Fatalf("%s: %d of %d elections not agreed in 120 s", algo, left, k)
		}
		left = c.notAgreed(opts)
	}
	return c, opts, time.Since(start)
}

// recordTo starts a recording (a CPU profile, an execution trace) into
// the file the environment variable env names, suffixed with the
// algorithm, and returns what stops it; both do nothing when env is unset.
func recordTo(b *testing.B, env, algo string, start func(io.Writer) error, stop func()) func() {
	f := os.Getenv(env)
	if f == "" {
		return func() {}
	}
	w, err := os.Create(f + "." + algo)
	if err != nil {
		b.Fatal(err)
	}
	if err := start(w); err != nil {
		b.Fatal(err)
	}
	return func() { stop(); w.Close() }
}
