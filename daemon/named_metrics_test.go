package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/daemon/devcluster"
)

// The named elections' metrics are counts with no label per election:
// node A stands in 200 elections, B in one of them (queued behind A's app
// there) and a second app on A queues in another; when A's apps close
// their campaigns the changes are counted and the gauges go down. No
// series of any family carries an election's name.
func TestNamedElectionMetricsAreCounts(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Nodes: 2, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	agreedLeader(t, c.Nodes)
	a, b := c.Nodes[0], c.Nodes[1]
	ctx := context.Background()
	const n = 200
	type closer interface{ Close() error }
	var mine []closer
	for i := range n {
		cand, err := a.Node.Campaign(ctx, fmt.Sprintf("job-%03d", i), "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, cand)
	}
	queued, err := a.Node.Campaign(ctx, "job-001", "a-second", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	waitFor(t, 20*time.Second, "b sees the 200 elections, all led", func() bool {
		nc := b.Node.NamedCounts()
		return nc.Elections == n && nc.LeaderChanges >= n
	})
	cb, err := b.Node.Campaign(ctx, "job-000", "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	var sa, sb scrape
	waitFor(t, 20*time.Second, "the counts in /metrics", func() bool {
		sa, sb = scrapeOf(t, a), scrapeOf(t, b)
		return sa.value("named_elections") == n && sa.value("named_elections_led") == n && sa.value("named_candidacies") == n+1 &&
			sb.value("named_elections") == n && sb.value("named_elections_led") == 0 && sb.value("named_candidacies") == 1 &&
			sa.value("named_elections_standing") == n && sb.value("named_elections_standing") == 1 &&
			sa.value("named_elections_leaderless") == 0 && sb.value("named_elections_leaderless") == 0
	})
	// Every election got its first leader: no failover yet.
	if fa, fb := sa.value("named_failover_seconds"), sb.value("named_failover_seconds"); fa != 0 || fb != 0 {
		t.Errorf("named_failover_seconds counts %v and %v before any failover, want 0", fa, fb)
	}
	if got := sa.value("named_leader_changes_total"); got < n {
		t.Errorf("a: named_leader_changes_total %v, want at least %d (each election got a leader)", got, n)
	}
	for _, s := range []scrape{sa, sb} {
		for name, f := range s {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if strings.HasPrefix(l.GetValue(), "job-") {
						t.Fatalf("%s has a label %s=%q: an election's name", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	}

	// A's apps leave, but for the one queued in job-001 (which stands next)
	// and job-000, which goes to B's app.
	before := sb.value("named_leader_changes_total")
	for _, cand := range mine {
		cand.Close()
	}
	waitFor(t, 20*time.Second, "the counts after A's apps left", func() bool {
		sa, sb = scrapeOf(t, a), scrapeOf(t, b)
		return sa.value("named_elections") == 2 && sa.value("named_elections_led") == 1 && sa.value("named_candidacies") == 1 &&
			sb.value("named_elections") == 2 && sb.value("named_elections_led") == 1 && sb.value("named_candidacies") == 1
	})
	if got := sb.value("named_leader_changes_total"); got < before+n {
		t.Errorf("b: named_leader_changes_total %v, was %v: want every election's change counted", got, before)
	}
	// job-000 passed from A's app to B's, job-001 to A's queued app: two
	// failovers, each seen by both nodes; the 198 left with nobody are none.
	deadline := time.Now().Add(20 * time.Second)
	for sa.value("named_failover_seconds") != 2 || sb.value("named_failover_seconds") != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: two failovers on each node (a counts %v, b %v)", sa.value("named_failover_seconds"), sb.value("named_failover_seconds"))
		}
		time.Sleep(20 * time.Millisecond) // polling interval
		sa, sb = scrapeOf(t, a), scrapeOf(t, b)
	}
}
