package node

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// setState reads s's events into last (the newest of each election) until
// ok holds, failing the test at the deadline.
func setState(t *testing.T, s *CandidacySet, last map[string]CandidacyEvent, d time.Duration, ok func(map[string]CandidacyEvent) bool) {
	t.Helper()
	deadline := time.After(d)
	var buf []CandidacyEvent
	for !ok(last) {
		select {
		case <-s.Ready():
			buf = s.Take(buf[:0], 0)
			for _, ev := range buf {
				last[ev.Leader.Election] = ev
			}
		case <-deadline:
			t.Fatalf("set of %d: state not reached within %v (%d elections seen)", s.Len(), d, len(last))
		}
	}
}

// allLead: every one of k elections' newest event says its candidacy leads
// on node id.
func allLead(k int, id election.NodeID) func(map[string]CandidacyEvent) bool {
	return func(last map[string]CandidacyEvent) bool {
		if len(last) < k {
			return false
		}
		for _, ev := range last {
			if ev.Event != EventLeader || ev.Leader.ID != id || ev.Leader.Term == 0 {
				return false
			}
		}
		return true
	}
}

// campaignAll has an app on every node stand in every election of opts, on
// one stream each, closed when the test ends.
func (c *cluster) campaignAll(opts []CampaignOptions) {
	c.t.Helper()
	for id := range c.nodes {
		c.campaignOn(opts, id)
	}
}

// campaignOn has the app of each node in ids stand in every election of
// opts on one stream, until the test ends.
func (c *cluster) campaignOn(opts []CampaignOptions, ids ...election.NodeID) {
	c.t.Helper()
	for _, id := range ids {
		s, err := c.nodes[id].CampaignMany(context.Background(), opts)
		if err != nil {
			c.t.Fatal(err)
		}
		c.t.Cleanup(func() { s.Close() })
	}
}

func shardNames(k int) []CampaignOptions {
	opts := make([]CampaignOptions, k)
	for i := range opts {
		opts[i] = CampaignOptions{Election: fmt.Sprintf("shard-%d", i), Value: "app"}
	}
	return opts
}

// Ten thousand candidacies on one stream cost state, not goroutines, and
// register in one loop pass.
func TestCampaignManyTenThousand(t *testing.T) {
	const k = 10_000
	c := newCluster(t, "bully", 1)
	nd := c.nodes[1]
	opts := shardNames(k)
	g0 := runtime.NumGoroutine()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	s, err := nd.CampaignMany(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	registered := time.Since(start)
	last := map[string]CandidacyEvent{}
	setState(t, s, last, 20*time.Second, allLead(k, 1))
	led := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if g := runtime.NumGoroutine(); g > g0+10 {
		t.Errorf("%d goroutines with %d candidacies, %d before", g, k, g0)
	}
	t.Logf("%d candidacies: registered in %v, all leading in %v; heap %+d B (%d B per candidacy, node state included); goroutines %d -> %d",
		k, registered, led, int64(m1.HeapAlloc)-int64(m0.HeapAlloc), (int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/k, g0, runtime.NumGoroutine())
	if got := len(nd.NamedElections()); got != k {
		t.Fatalf("node lists %d elections, want %d", got, k)
	}
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("withdrawn in %v", time.Since(start))
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	// What readers see follows at the end of the loop pass.
	deadline := time.Now().Add(5 * time.Second)
	for len(nd.NamedElections()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("node still lists %d elections after Close", len(nd.NamedElections()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A set's candidacies behave as single ones: its leaderships are handed
// over when it closes, and another node's set leads them all at a higher
// token.
func TestCampaignManyHandsOverOnClose(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			const k = 20
			c := newCluster(t, algo, 2)
			c.agree(10*time.Second, 0)
			a, err := c.nodes[1].CampaignMany(context.Background(), shardNames(k))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			lastA := map[string]CandidacyEvent{}
			setState(t, a, lastA, 10*time.Second, allLead(k, 1))
			b, err := c.nodes[2].CampaignMany(context.Background(), shardNames(k))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			lastB := map[string]CandidacyEvent{}
			setState(t, b, lastB, 10*time.Second, func(last map[string]CandidacyEvent) bool {
				if len(last) < k {
					return false
				}
				for _, ev := range last {
					if ev.Event != EventFollower || ev.Leader.ID != 1 {
						return false
					}
				}
				return true
			})
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			setState(t, b, lastB, 10*time.Second, allLead(k, 2))
			for name, ev := range lastB {
				if ev.Leader.Term <= lastA[name].Leader.Term {
					t.Fatalf("%s: b leads at %v, a led at %v", name, ev.Leader.Term, lastA[name].Leader.Term)
				}
			}
		})
	}
}

// A bad list is refused whole, naming the first offender; nothing stands.
func TestCampaignManyRefusesBadLists(t *testing.T) {
	c := newCluster(t, "bully", 1)
	nd := c.nodes[1]
	bad := func(opts []CampaignOptions, want error, wantText string) {
		t.Helper()
		_, err := nd.CampaignMany(context.Background(), opts)
		if err == nil || (want != nil && !errors.Is(err, want)) || !strings.Contains(fmt.Sprint(err), wantText) {
			t.Fatalf("err %v, want %v naming %q", err, want, wantText)
		}
	}
	opts := shardNames(5)
	opts[3].Election = "no/slash"
	bad(opts, named.ErrInvalidName, `elections[3] "no/slash"`)
	opts = shardNames(5)
	opts[4].Election = "shard-1"
	bad(opts, ErrDuplicateElection, `elections[4] "shard-1": listed twice (first at elections[1])`)
	opts = shardNames(2)
	opts[1].Placement = "random"
	bad(opts, nil, `elections[1] "shard-1": placement "random"`)
	bad(nil, ErrNoElections, "no elections")
	bad(make([]CampaignOptions, MaxCampaignElections+1), ErrTooManyElections, fmt.Sprint(MaxCampaignElections+1))
	if els := nd.NamedElections(); len(els) != 0 {
		t.Fatalf("refused lists left %d elections", len(els))
	}
}
