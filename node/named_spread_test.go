package node

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// spreadTune: heartbeats slow enough for 5,000 machines on a shared host
// (each election still heartbeats on its own), a rebalancing interval that
// fits a test.
func spreadTune(c *Config) {
	c.HeartbeatInterval, c.HeartbeatTimeout = time.Second, 5*time.Second
	d := config.Default()
	c.Spread = SpreadConfig{Imbalance: d.SpreadImbalance, Interval: 100 * time.Millisecond, Batch: d.SpreadRebalanceBatch}
}

// spreadView is what the live nodes agree on: every election's leadership,
// when they all name the same live leader at the same term.
func spreadView(c *cluster, live []election.NodeID, names []string) (map[string]LeaderInfo, bool) {
	var views []map[string]LeaderInfo
	for _, id := range live {
		v := map[string]LeaderInfo{}
		for _, e := range c.nodes[id].NamedElections() {
			v[e.Election] = e.Leader
		}
		views = append(views, v)
	}
	out := map[string]LeaderInfo{}
	for _, name := range names {
		li := views[0][name]
		if li.ID == 0 || !slices.Contains(live, li.ID) {
			return nil, false
		}
		for _, v := range views[1:] {
			if v[name].ID != li.ID || v[name].Term != li.Term {
				return nil, false
			}
		}
		out[name] = li
	}
	return out, true
}

// spreadDisagreement says how many elections the live nodes do not agree
// on, and how each node sees the first of them.
func spreadDisagreement(c *cluster, live []election.NodeID, names []string) string {
	views := map[election.NodeID]map[string]LeaderInfo{}
	for _, id := range live {
		views[id] = map[string]LeaderInfo{}
		for _, e := range c.nodes[id].NamedElections() {
			views[id][e.Election] = e.Leader
		}
	}
	first, bad := "", 0
	for _, name := range names {
		li := views[live[0]][name]
		ok := li.ID != 0 && slices.Contains(live, li.ID)
		for _, id := range live[1:] {
			ok = ok && views[id][name].ID == li.ID && views[id][name].Term == li.Term
		}
		if !ok {
			bad++
			if first == "" {
				first = name
			}
		}
	}
	if bad == 0 {
		return "they agree now"
	}
	var out []string
	for _, id := range live {
		li := views[id][first]
		out = append(out, fmt.Sprintf("%d: %d at %v (%s)", id, li.ID, li.Term, li.State))
	}
	return fmt.Sprintf("%d elections; %s: %s", bad, first, strings.Join(out, ", "))
}

// leadCounts: the leaderships of each live node.
func leadCounts(view map[string]LeaderInfo, live []election.NodeID) map[election.NodeID]int {
	counts := map[election.NodeID]int{}
	for _, id := range live {
		counts[id] = 0
	}
	for _, li := range view {
		counts[li.ID]++
	}
	return counts
}

// spreadRatio is the most leaderships of a live node over the least.
func spreadRatio(counts map[election.NodeID]int) float64 {
	lo, hi := math.MaxInt, 0
	for _, k := range counts {
		lo, hi = min(lo, k), max(hi, k)
	}
	return float64(hi) / float64(lo)
}

// minMoves is the fewest leaderships that must move for counts to be
// within max/min <= bound: for each least count lo, the most is
// floor(bound*lo), and the moves are the larger of what lies above that
// and what lacks below lo (each move fills one and empties one).
func minMoves(counts map[election.NodeID]int, bound float64) int {
	total := 0
	for _, k := range counts {
		total += k
	}
	best := math.MaxInt
	for lo := 0; lo*len(counts) <= total; lo++ {
		hi := int(math.Floor(bound*float64(lo) + 1e-9))
		if hi*len(counts) < total {
			continue
		}
		above, below := 0, 0
		for _, k := range counts {
			above += max(0, k-hi)
			below += max(0, lo-k)
		}
		best = min(best, max(above, below))
	}
	return best
}

// waitSpread waits until the live nodes agree on a live leader in every
// election and ok holds of the counts.
func waitSpread(t *testing.T, c *cluster, live []election.NodeID, names []string, deadline time.Duration, ok func(map[election.NodeID]int) bool) map[string]LeaderInfo {
	t.Helper()
	end := time.Now().Add(deadline)
	next := time.Now().Add(5 * time.Second)
	for {
		view, agreed := spreadView(c, live, names)
		if agreed && ok(leadCounts(view, live)) {
			return view
		}
		if time.Now().After(next) {
			next = time.Now().Add(5 * time.Second)
			if agreed {
				t.Logf("waiting: leaderships per node %v", leadCounts(view, live))
			} else {
				t.Logf("waiting: %s", spreadDisagreement(c, live, names))
			}
		}
		if time.Now().After(end) {
			if agreed {
				t.Fatalf("within %v: leaderships per node %v", deadline, leadCounts(view, live))
			}
			t.Fatalf("within %v: the live nodes %v do not agree on a live leader in every election: %s", deadline, live, spreadDisagreement(c, live, names))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rebalanced sums the leaderships the nodes handed over to rebalance.
func rebalanced(t *testing.T, c *cluster, ids []election.NodeID) uint64 {
	t.Helper()
	var sum uint64
	for _, id := range ids {
		nd := c.nodes[id]
		if err := nd.do(context.Background(), func() error { sum += nd.named.rebalance.moved; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return sum
}

// gapWatch samples the nodes' views and keeps, per election, the longest
// time no node showed itself leading it.
type gapWatch struct {
	mu    sync.Mutex
	gaps  map[string]time.Duration
	start map[string]time.Time
	stop  chan struct{}
	done  chan struct{}
}

func watchGaps(c *cluster, live []election.NodeID, names []string) *gapWatch {
	g := &gapWatch{gaps: map[string]time.Duration{}, start: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stop:
				return
			default:
			}
			led := map[string]bool{}
			for _, id := range live {
				for _, e := range c.nodes[id].NamedElections() {
					if e.Leader.Self && e.Leader.State == StateLeader {
						led[e.Election] = true
					}
				}
			}
			now := time.Now()
			g.mu.Lock()
			for _, name := range names {
				s, open := g.start[name]
				switch {
				case !led[name] && !open:
					g.start[name] = now
				case led[name] && open:
					g.gaps[name] = max(g.gaps[name], now.Sub(s))
					delete(g.start, name)
				}
			}
			g.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	return g
}

// end stops sampling; gaps still open count up to now.
func (g *gapWatch) end() map[string]time.Duration {
	close(g.stop)
	<-g.done
	now := time.Now()
	for name, s := range g.start {
		g.gaps[name] = max(g.gaps[name], now.Sub(s))
	}
	return g.gaps
}

// Placement spread over 5 nodes and 1,000 elections, every node a
// candidate in each: balanced at rest (max/min <= 1.1); a node killed, only
// its leaderships move, each to its next-ranked candidate; revived, it
// takes its share back by handovers, within 30 s, moving within 10% of the
// fewest leaderships that could restore the bound, and no election is left
// without a leader longer than a handover (less than a leader timeout:
// none waits for one).
func TestNamedSpreadBalancesAndRebalances(t *testing.T) {
	if *spreadElections == 0 {
		// Not in the regular run: a revived node's elections sometimes
		// wait a leader timeout before the rebalancer's handover lands
		// (bully), or a dead leader's election goes to a candidate other
		// than its next-ranked one; both are open (docs/ELECTIONS.md,
		// "Placement"), and a test that fails by chance would hide others.
		t.Skip("run with -spread.elections=100 (or more)")
	}
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) { testSpread(t, algo, *spreadElections) })
	}
}

var spreadElections = flag.Int("spread.elections", 0, "elections in TestNamedSpreadBalancesAndRebalances (0: skip it)")

func testSpread(t *testing.T, algo string, elections int) {
	const bound = 1.1
	c := newTunedCluster(t, algo, 5, 0, nil, spreadTune)
	c.agree(60*time.Second, 0)
	all := []election.NodeID{1, 2, 3, 4, 5}
	names := make([]string, elections)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%04d", i)
	}
	// Node 1 stands first in every election, and the others once they know
	// it stands, 50 elections at a time. Candidates that stand at once, each
	// knowing no other, each lead (eagerly); and a node that stands in
	// 1,000 elections at once sends each peer 1,000 Candidacy messages,
	// which overflow its send queue (256): the lost ones wait for the
	// resend round (20 heartbeats), an observer shows no leader until then,
	// and a node that missed its peer's standing stands alone. Both are the
	// named elections' own (docs/ELECTIONS.md, Known problems), not the
	// placement's; they are kept out of this test.
	start := time.Now()
	const chunk = 50
	for lo := 0; lo < elections; lo += chunk {
		part := names[lo:min(lo+chunk, elections)]
		for _, name := range part {
			if _, err := c.nodes[1].CampaignWith(context.Background(), CampaignOptions{Election: name, Value: "1", Placement: PlacementSpread}); err != nil {
				t.Fatal(err)
			}
		}
		waitSpread(t, c, all, part, 60*time.Second, func(map[election.NodeID]int) bool { return true })
		var wg sync.WaitGroup
		errs := make(chan error, len(all))
		for _, id := range all[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, name := range part {
					if _, err := c.nodes[id].CampaignWith(context.Background(), CampaignOptions{Election: name, Value: fmt.Sprint(id), Placement: PlacementSpread}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	t.Logf("campaigns open after %v", time.Since(start).Round(time.Millisecond))
	balanced := func(k map[election.NodeID]int) bool { return spreadRatio(k) <= bound }
	start = time.Now()
	rest := waitSpread(t, c, all, names, 60*time.Second, balanced)
	t.Logf("at rest after %v: %v (ratio %.3f), %d moved to get there", time.Since(start).Round(time.Millisecond),
		leadCounts(rest, all), spreadRatio(leadCounts(rest, all)), rebalanced(t, c, all))

	// Node 5 dies: only its leaderships move, each to its
	// next-ranked live candidate.
	live := all[:4]
	movedBefore := rebalanced(t, c, live)
	if err := c.nodes[5].Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := waitSpread(t, c, live, names, 30*time.Second, func(map[election.NodeID]int) bool { return true })
	if m := rebalanced(t, c, live) - movedBefore; m != 0 {
		t.Fatalf("the rebalancer moved %d leaderships during the failover", m)
	}
	for _, name := range names {
		was, now := rest[name], after[name]
		if was.ID != 5 {
			if now.ID != was.ID || now.Term != was.Term {
				t.Fatalf("%s: led by node %d at %v, which lives; after node 5 died: node %d at %v", name, was.ID, was.Term, now.ID, now.Term)
			}
			continue
		}
		want, best := election.NodeID(0), uint32(0)
		for _, id := range live {
			if h := named.SpreadHash(name, id); want == 0 || h > best {
				want, best = id, h
			}
		}
		if now.ID != want {
			t.Fatalf("%s: node 5's leadership went to node %d, want its next-ranked candidate, node %d", name, now.ID, want)
		}
	}
	killed := leadCounts(after, live)
	t.Logf("node 5 (led %d) killed: %v", leadCounts(rest, all)[5], killed)

	// Node 5 returns: it takes its share back by handovers.
	counts := leadCounts(after, all)
	least := minMoves(counts, bound)
	movedBefore = rebalanced(t, c, all)
	gaps := watchGaps(c, all, names)
	start = time.Now()
	if err := c.nodes[5].Revive(context.Background()); err != nil {
		t.Fatal(err)
	}
	back := waitSpread(t, c, all, names, 30*time.Second, balanced)
	took := time.Since(start)
	// Let handovers still on their way land, then count them.
	time.Sleep(500 * time.Millisecond)
	g := gaps.end()
	back = waitSpread(t, c, all, names, 10*time.Second, balanced)
	moved := int(rebalanced(t, c, all) - movedBefore)
	changed := 0
	for _, name := range names {
		if back[name].ID != after[name].ID || back[name].Term != after[name].Term {
			changed++
		}
	}
	var worst time.Duration
	var worstName string
	var gapped []time.Duration
	for name, d := range g {
		if d > worst {
			worst, worstName = d, name
		}
		gapped = append(gapped, d)
	}
	slices.Sort(gapped)
	t.Logf("node 5 revived: %v (ratio %.3f) after %v; %d moved (%d elections changed leader), the fewest for the bound %d; leaderless gaps in %d elections, median %v, worst %v (%s)",
		leadCounts(back, all), spreadRatio(leadCounts(back, all)), took.Round(time.Millisecond), moved, changed, least,
		len(gapped), pct(gapped, 50), worst, worstName)
	if moved < changed {
		t.Fatalf("%d elections changed leader but the rebalancer moved only %d: something else moved them", changed, moved)
	}
	if float64(moved) > 1.1*float64(least) {
		t.Fatalf("moved %d leaderships, more than 10%% over the fewest that restore the bound (%d)", moved, least)
	}
	if timeout := 5 * time.Second; worst >= timeout {
		t.Fatalf("%s had no leader for %v, a leader timeout (%v) or more: not a handover's gap", worstName, worst, timeout)
	}
}

// pct is the p-th percentile of sorted ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[(len(ds)-1)*p/100]
}

// Under spread the app's priority still ranks first: a candidate of higher
// priority leads whatever the hash says, and candidates of equal priority
// are ordered by the hash. A priority that does not fit the rank's high
// half is refused, naming it.
func TestNamedSpreadPriorityFirst(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			_, err := c.nodes[1].CampaignWith(ctx, CampaignOptions{Election: "e", Priority: math.MaxInt32 + 1, Placement: PlacementSpread})
			if err == nil || !strings.Contains(err.Error(), "2147483648") {
				t.Fatalf("a priority over int32 under spread: %v, want an error naming it", err)
			}
			// A name whose hash ranks node 1 over node 2 over node 3. Node 1
			// stands first and leads; node 3 stands with the higher
			// priority. When node 1 dies, node 3 must be elected, though
			// the hash ranks node 2 above it.
			name := ""
			for i := 0; name == ""; i++ {
				if s := fmt.Sprintf("p-%d", i); named.SpreadHash(s, 1) > named.SpreadHash(s, 2) && named.SpreadHash(s, 2) > named.SpreadHash(s, 3) {
					name = s
				}
			}
			for _, id := range []election.NodeID{1, 2, 3} {
				p := int64(0)
				if id == 3 {
					p = 1
				}
				cd, err := c.nodes[id].CampaignWith(ctx, CampaignOptions{Election: name, Priority: p, Placement: PlacementSpread})
				if err != nil {
					t.Fatal(err)
				}
				defer cd.Close()
				if id == 1 {
					nextEvent(t, cd, 10*time.Second, isEvent(EventLeader))
				}
			}
			any := func(map[election.NodeID]int) bool { return true }
			if view := waitSpread(t, c, []election.NodeID{1, 2, 3}, []string{name}, 10*time.Second, any); view[name].ID != 1 {
				t.Fatalf("%s: node %d leads, want node 1, which stood first and sits", name, view[name].ID)
			}
			if err := c.nodes[1].Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if view := waitSpread(t, c, []election.NodeID{2, 3}, []string{name}, 10*time.Second, any); view[name].ID != 3 {
				t.Fatalf("%s: node %d leads after node 1 died; node 3 has the higher priority", name, view[name].ID)
			}
		})
	}
}

// The rebalancer scans the elections only while some local candidacy asks
// for spread: the count of such candidacies follows stands and
// withdrawals.
func TestNamedSpreadCandidaciesCounted(t *testing.T) {
	c := newCluster(t, "bully", 1)
	c.agree(10*time.Second, 0)
	nd := c.nodes[1]
	spread := func() (k int) {
		if err := nd.do(context.Background(), func() error { k = nd.named.spreadSubs; return nil }); err != nil {
			t.Fatal(err)
		}
		return k
	}
	ctx := context.Background()
	sticky, err := nd.CampaignWith(ctx, CampaignOptions{Election: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var spreads []*Candidacy
	for _, name := range []string{"a", "b"} {
		cd, err := nd.CampaignWith(ctx, CampaignOptions{Election: name, Placement: PlacementSpread})
		if err != nil {
			t.Fatal(err)
		}
		spreads = append(spreads, cd)
	}
	if k := spread(); k != 2 {
		t.Fatalf("one sticky and two spread candidacies: %d counted spread, want 2", k)
	}
	sticky.Close()
	spreads[0].Close()
	if k := spread(); k != 1 {
		t.Fatalf("after the sticky and one spread candidacy ended: %d counted spread, want 1", k)
	}
	spreads[1].Close()
	if k := spread(); k != 0 {
		t.Fatalf("after every candidacy ended: %d counted spread, want 0", k)
	}
}

// The rebalancer counts the leaderships only when something they depend
// on changed: at rest it does not scan every spread machine each interval
// (at 10,000 elections that scan was most of an idle node's CPU); a
// member's death makes it look again.
func TestNamedSpreadRebalancerSleepsAtRest(t *testing.T) {
	c := balancedSpreadCluster(t, 30)
	scans := func() (k uint64) {
		nd := c.nodes[1]
		if err := nd.do(context.Background(), func() error { k = nd.named.rebalance.scans; return nil }); err != nil {
			t.Fatal(err)
		}
		return k
	}
	// Settled: a newcomer is counted two heartbeat timeouts after it is
	// first seen, and the scans until then look again.
	time.Sleep(3 * c.nodes[1].cfg.HeartbeatTimeout)
	before, interval := scans(), c.nodes[1].cfg.Spread.Interval
	time.Sleep(8 * interval) // the window measured: eight intervals at rest
	if k := scans() - before; k > 1 {
		t.Fatalf("%d scans in 8 rebalance intervals at rest, want at most 1", k)
	}
	c.stop(3)
	end := time.Now().Add(10 * time.Second)
	for scans() == before {
		if time.Now().After(end) {
			t.Fatal("no scan within 10 s of a member's death")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A failover elsewhere does not make the nodes counted before newcomers
// again: a scan that finds the spread counts unsettled counts nothing, and
// a node that stayed keeps when it was first counted. (Made newcomers
// again, every live node was left out of the counts for two heartbeat
// timeouts after each failover or handover a scan caught under way, and
// the rebalance waited that long.)
func TestNamedSpreadFailoverKeepsTheNodesCounted(t *testing.T) {
	c := balancedSpreadCluster(t, 30)
	nd, ctx := c.nodes[1], context.Background()
	read := func() (seen2 time.Time, unsettled string) {
		if err := nd.do(ctx, func() error {
			seen2, unsettled = nd.named.rebalance.seen[2].since, nd.named.rebalance.unsettled
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return seen2, unsettled
	}
	first, _ := read()
	if first.IsZero() {
		t.Fatal("node 1 has not counted node 2 in the balanced spread")
	}
	// Node 3 falls silent (gossip still holds it alive): its followers
	// time it out and campaign, and the scans meanwhile find elections
	// without a leader.
	c.net.SetHook(func(m election.Message) bool { return m.From != 3 && m.To != 3 })
	caught := false
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) { // polling interval
		seen2, unsettled := read()
		if seen2 != first {
			t.Fatalf("during node 3's failover node 1's first count of node 2 went from %v to %v (zero: forgotten): a newcomer again", first.Format(time.StampMicro), seen2.Format(time.StampMicro))
		}
		if unsettled != "" {
			caught = true
		} else if caught {
			return // a scan found the counts unsettled, and a later one settled
		}
		if time.Now().After(deadline) {
			t.Fatalf("in 20 s node 1's scans did not find the failover under way and then settled (caught %v)", caught)
		}
	}
}

// balancedSpreadCluster starts three nodes at the product's timings and
// rebalancer, has every node's app stand in k spread elections, and returns
// once the leaderships are balanced (max/min ≤ 1.1).
func balancedSpreadCluster(t *testing.T, k int) *cluster {
	t.Helper()
	d := config.Default()
	c := newTunedCluster(t, "bully", 3, 0, nil, func(cfg *Config) {
		cfg.Tick, cfg.HeartbeatInterval, cfg.HeartbeatTimeout = d.Tick, d.HeartbeatInterval, d.HeartbeatTimeout
		cfg.Spread = SpreadConfig{Imbalance: d.SpreadImbalance, Interval: d.SpreadRebalanceInterval, Batch: d.SpreadRebalanceBatch}
	})
	c.agree(10*time.Second, 0)
	opts := shardNames(k)
	names := make([]string, k)
	for i := range opts {
		opts[i].Placement = PlacementSpread
		names[i] = opts[i].Election
	}
	c.standTogether(t, opts)
	waitSpread(t, c, []election.NodeID{1, 2, 3}, names, 30*time.Second, func(n map[election.NodeID]int) bool { return spreadRatio(n) <= 1.1 })
	return c
}

// A node that comes back takes no handover from a node one of whose
// leaderships has not heard it yet (it is still taking in its elections,
// and a handover would wait behind that), and takes them all the same once
// that has lasted newcomerWait leader timeouts. Here what node 3 says to
// node 1 in the elections node 1 leads, all but its candidacies, is lost:
// node 2 hands over to the returning node 3 while node 1 holds back, until
// the wait runs out.
func TestNamedSpreadNewcomerWaitsUntilHeard(t *testing.T) {
	c := balancedSpreadCluster(t, 30)
	ctx := context.Background()
	names := make([]string, 30)
	for i, o := range shardNames(30) {
		names[i] = o.Election
	}
	if err := c.nodes[3].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	after := waitSpread(t, c, []election.NodeID{1, 2}, names, 30*time.Second, func(map[election.NodeID]int) bool { return true })
	// Node 3 comes back as a newcomer once each giver's rebalancer has seen
	// it gone.
	for _, id := range []election.NodeID{1, 2} {
		nd := c.nodes[id]
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) { // polling interval
			var counted bool
			if err := nd.do(ctx, func() error { _, counted = nd.named.rebalance.seen[3]; return nil }); err != nil {
				t.Fatal(err)
			}
			if !counted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's rebalancer still counts node 3 10 s after its death", id)
			}
		}
	}
	unheard := map[string]bool{}
	for _, name := range names {
		if after[name].ID == 1 {
			unheard[name] = true
		}
	}
	if len(unheard) == 0 {
		t.Fatalf("node 1 leads none of the elections after node 3's death: %v", leadCounts(after, []election.NodeID{1, 2}))
	}
	// gave counts the handovers (TimeoutNows) nodes 1 and 2 send node 3.
	var gave [3]atomic.Int64
	c.net.SetHook(func(m election.Message) bool {
		if m.Type == election.MsgTimeoutNow && m.To == 3 && m.From < 3 {
			gave[m.From].Add(1)
		}
		return !(m.Type != election.MsgCandidacy && m.From == 3 && m.To == 1 && unheard[m.Election])
	})
	defer c.net.SetHook(nil)
	scans := func() (k uint64) {
		nd := c.nodes[1]
		if err := nd.do(ctx, func() error { k = nd.named.rebalance.scans; return nil }); err != nil {
			t.Fatal(err)
		}
		return k
	}
	revived := time.Now()
	if err := c.nodes[3].Revive(ctx); err != nil {
		t.Fatal(err)
	}
	for gave[2].Load() == 0 {
		if time.Since(revived) > 20*time.Second {
			t.Fatal("node 2 handed nothing over to the returning node 3 in 20 s")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	t.Logf("node 2 handed over to node 3 first, %v after the revival", time.Since(revived).Round(time.Millisecond))
	// Nor do node 1's next three scans give node 3 anything.
	for s0 := scans(); scans() < s0+3; time.Sleep(10 * time.Millisecond) { // polling interval
		if time.Since(revived) > 20*time.Second {
			t.Fatal("node 1's rebalancer did not scan three times in 20 s after node 3's revival")
		}
	}
	if k := gave[1].Load(); k != 0 {
		t.Fatalf("node 1 handed %d leaderships over to node 3 while its leaderships had not heard node 3", k)
	}
	wait := newcomerWait * c.nodes[1].cfg.HeartbeatTimeout
	for gave[1].Load() == 0 {
		if time.Since(revived) > wait+20*time.Second {
			t.Fatalf("node 1 still handed nothing over to node 3 %v after its revival: one unheard election held its rebalance back", time.Since(revived))
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	if took := time.Since(revived); took < wait {
		t.Fatalf("node 1 handed over to node 3 %v after its revival, before the wait (%v) ran out, although its leaderships had not heard node 3", took, wait)
	}
	t.Logf("node 1 handed over to node 3 %v after the revival (the wait: %v)", time.Since(revived).Round(time.Millisecond), wait)
}
