package main

// electbench shards: a leader for every shard. Five electord nodes (static
// build), and on every node one candidate app candidateApp in N elections
// through it (shards_stand.go: the benchmark holds the apps' campaigns in
// its own process). Per algorithm:
//
//   - base: every app stands in one election ("base", kept for the whole
//     run); idle CPU, RSS and Go heap per node over --window.
//   - start: every app stands in shard-00000 ... at once; the time from the
//     first campaign opening until every node lists every election with the
//     same leader (node, term).
//   - idle: the same figures as base with N+1 elections; memory per election
//     per node = (with N − with 1) / N.
//   - crash: SIGKILL of the node leading the most elections; per election,
//     the time until an observer node shows a new leader: exactly (a
//     WatchLeader stream's arrival time) for a sample of up to --watch of
//     them, and for all of them by polling the observer's ListElections
//     (exact to one poll: the report gives the polls' length); then how many
//     are leaderless (or still led by the dead node) after --settle.
//   - return: the node restarts, its app stands again in every election;
//     the time until every node agrees on every election again, and how
//     many leaderships moved against before the return.
//
// Observing thousands of elections: ListElections answers one node's view of
// all of them in one call (about 60 bytes an election), cheap enough to poll
// every node in turn; a WatchLeader stream per election is exact but a node
// serves at most --max-watchers (1024) of them, so it is used on a sample.

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/electord/electord/client"
)

// largeAnswers lets a ListElections answer of 100,000 elections (about
// 6 MB) through; gRPC's default receive limit is 4 MiB.
var largeAnswers = grpc.MaxCallRecvMsgSize(256 << 20)

// shardsFig is one run's figures for one algorithm.
type shardsFig struct {
	algo      string
	elections int
	opened    time.Duration // all campaigns registered
	agreed    time.Duration // every node lists every election agreed
	agreedRes time.Duration // the length of the poll round that saw it

	base, idle []procUsage // per node
	baseHeap   []float64   // MiB per node
	idleHeap   []float64

	restSpread string
	// preCrashSpread: the leaderships after the idle window, before the
	// crash (spread: after the rebalancer's moves at rest).
	preCrashSpread string
	crash          shardFailover // SIGKILL of the node leading the most
	crashSpread    string

	returned     time.Duration // restart until every node agrees again
	movedBack    int
	returnSpread string

	// spread: after the return, until the leaderships are balanced
	// (max/min ≤ 1 + spreadImbalance) or rebalanceWithin has passed.
	spread         bool
	balanced       time.Duration // restart until balanced; 0: not within rebalanceWithin
	balanceMoved   int           // leaderships moved from the crash's to the balanced state
	balanceMin     int           // the least moves that balance the crash's state (minMoves)
	balanceSpread  string
	seenLeaderless int           // elections some node showed leaderless in a poll meanwhile
	balancePoll    time.Duration // median poll round
	// handoverGaps: the leaderless time of handovers made one at a time at
	// rest; returnGaps: of the crashed node's elections through its
	// return's rebalance (WatchLeader streams on the other nodes).
	handoverGaps, returnGaps gapFigure

	// appCrash: the death of the app on the node leading the most, after
	// the return (its connection closes without a word, as a dead
	// process's does); its node lives on.
	appCrash shardFailover

	logs    []string // node log messages by count, all nodes
	sends   []string // per node: peer messages sent and failed, by type
	started []string // the same when the start agreed
	stopped string
}

func shardsCmd(args []string) error {
	fs := flag.NewFlagSet("shards", flag.ExitOnError)
	cf := commonFlags(fs)
	nElections := fs.Int("elections", 1000, "elections every node's app stands in")
	streams := fs.String("streams", "per-election", "how an app holds its candidacies: "+strings.Join(slices.Sorted(maps.Keys(standModes)), ", "))
	placement := fs.String("placement", "", "placement every campaign asks for (sticky, spread; empty: the node's default)")
	window := fs.Duration("window", 10*time.Second, "idle measurement window (base and with N)")
	settle := fs.Duration("settle", 5*time.Second, "wait after agreement before idle; after the crash before counting leaderless elections")
	watch := fs.Int("watch", 500, "the crash's exact sample: WatchLeader streams on the observer, at most this many of the victim's elections (electord serves 1024 watches)")
	gaps := fs.Int("gap-watch", 200, "with placement spread: elections whose leaderless time is watched on every node, through handovers at rest (half of them, one at a time) and through the return's rebalance (the crashed node's); 0: not measured")
	timeout := fs.Duration("timeout", 120*time.Second, "longest wait for the campaigns to open, and for agreement")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	fs.Parse(args)
	mk, ok := standModes[*streams]
	if !ok {
		return fmt.Errorf("--streams %q: want one of %s", *streams, strings.Join(slices.Sorted(maps.Keys(standModes)), ", "))
	}
	var opts []client.CampaignOption
	if o, err := placementOption(*placement); err != nil {
		return err
	} else if o != nil {
		opts = append(opts, o)
	}
	if *nElections < 1 {
		return fmt.Errorf("--elections %d: want at least 1", *nElections)
	}
	sb, err := cf.open(*out)
	if err != nil {
		return err
	}
	defer sb.close()
	if len(sb.bins) != 1 {
		return fmt.Errorf("shards measures one binary (--electord with one path)")
	}
	bin, pr := sb.bins[0], sb.pr
	pr("# electbench shards: %d elections × %d nodes\n\n", *nElections, *cf.nodes)
	pr("`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %s/%s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadavg())
	pr("- %d electord processes, %s; one candidate app per node standing in every election through it (%s streams, held by the benchmark's process), placement %q\n",
		*cf.nodes, sb.config, *streams, *placement)
	pr("- electord: `%s` (%s)\n\n", bin.path, describe(bin.path))
	var figs []*shardsFig
	for _, algo := range sb.algos {
		logf("%s: %d elections", algo, *nElections)
		// /metrics (the Go heap) is served on --health-addr only.
		health := map[int]string{}
		for id := 1; id <= *cf.nodes; id++ {
			port, err := freePort()
			if err != nil {
				return err
			}
			health[id] = fmt.Sprintf("127.0.0.1:%d", port)
		}
		c, err := startClusterWith(bin.path, algo, *cf.nodes, strings.Fields(*cf.extra),
			func(id int) []string { return []string{"--health-addr", health[id]} }, logf)
		if err != nil {
			return err
		}
		f := &shardsFig{algo: algo, elections: *nElections, spread: *placement == "spread"}
		err = measureShards(c, f, mk, opts, *nElections, *window, *settle, *watch, *gaps, *timeout)
		f.logs = clusterLogs(c)
		for _, p := range running(c) {
			f.sends = append(f.sends, fmt.Sprintf("node %d: %s", p.id, sendStats(p)))
		}
		c.stop()
		if err != nil {
			f.stopped = err.Error()
			logf("%s: stopped: %v", algo, err)
		}
		figs = append(figs, f)
		shardsReport(pr, []*shardsFig{f})
	}
	pr("\nload average at the end %s\n", loadavg())
	return nil
}

// apps is every node's candidate app, by node id.
type shardApps struct {
	mk   standFactory
	opts []client.CampaignOption
	mu   sync.Mutex
	by   map[uint64]candidateApp
}

func (a *shardApps) standAll(ctx context.Context, ps []*proc, names []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a.mk(p.api, fmt.Sprintf("app-%d", p.id), a.opts)
			a.mu.Lock()
			if a.by[p.id] == nil {
				a.by[p.id] = s
			} else {
				a.by[p.id] = multiStanding{a.by[p.id], s}
			}
			a.mu.Unlock()
			errs[i] = s.stand(ctx, names)
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// drop forgets (and closes) node id's app: its node died.
func (a *shardApps) drop(id uint64) {
	if s := a.take(id); s != nil {
		s.close()
	}
}

// crash ends node id's app as its process's death would: its connections
// close without a word (no stream is ended first). Its node lives on.
func (a *shardApps) crash(id uint64) {
	if s := a.take(id); s != nil {
		s.crash()
	}
}

// take forgets node id's app and returns it (nil: none).
func (a *shardApps) take(id uint64) candidateApp {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.by[id]
	delete(a.by, id)
	return s
}

func (a *shardApps) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, s := range a.by {
		s.close()
		delete(a.by, id)
	}
}

// multiStanding is one app's candidacies opened in several stands.
type multiStanding []candidateApp

func (m multiStanding) stand(context.Context, []string) error { return nil }
func (m multiStanding) close() {
	for _, s := range m {
		s.close()
	}
}
func (m multiStanding) crash() {
	for _, s := range m {
		s.crash()
	}
}

func running(c *cluster) []*proc {
	var ps []*proc
	for _, p := range c.procs {
		if p.isRunning() {
			ps = append(ps, p)
		}
	}
	return ps
}

// pollAgreed lists every running node's elections in turn until they agree
// on every one of names; it returns the leaderships, when the round that
// saw it ended, and that round's length.
func pollAgreed(ctx context.Context, c *cluster, names []string, timeout time.Duration) (map[string]lead, time.Time, time.Duration, error) {
	end := time.Now().Add(timeout)
	why := ""
	for time.Now().Before(end) && ctx.Err() == nil {
		var lists []nodeList
		t0 := time.Now()
		for _, p := range running(c) {
			lists = append(lists, listOf(ctx, p))
		}
		t1 := time.Now()
		leads, reason := agreement(lists, names)
		if leads != nil {
			return leads, t1, t1.Sub(t0), nil
		}
		if reason != why && !strings.HasPrefix(reason, fmt.Sprint(len(names))) {
			logf("waiting: %s", reason)
		}
		why = reason
		time.Sleep(20 * time.Millisecond)
	}
	return nil, time.Time{}, 0, fmt.Errorf("no agreement within %v: %s", timeout, why)
}

func measureShards(c *cluster, f *shardsFig, mk standFactory, opts []client.CampaignOption, n int, window, settle time.Duration, watch, gaps int, timeout time.Duration) error {
	ctx := context.Background()
	if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
		return fmt.Errorf("the default election: %w", err)
	}
	apps := &shardApps{mk: mk, opts: opts, by: map[uint64]candidateApp{}}
	defer apps.closeAll()
	nodes := make([]uint64, len(c.procs))
	for i, p := range c.procs {
		nodes[i] = p.id
	}

	// base: one election.
	base := []string{"base"}
	if err := apps.standAll(ctx, c.procs, base); err != nil {
		return err
	}
	if _, _, _, err := pollAgreed(ctx, c, base, timeout); err != nil {
		return fmt.Errorf("base: %w", err)
	}
	time.Sleep(settle)
	f.base, f.baseHeap = idleUsage(c, window)

	// start: n elections at once.
	names := shardNames(n)
	profiledStart := profileNodes("ELECTBENCH_START_PROFILES", c.procs, 10*time.Second)
	t0 := time.Now()
	octx, ocancel := context.WithTimeout(ctx, timeout)
	err := apps.standAll(octx, c.procs, names)
	ocancel()
	if err != nil {
		return fmt.Errorf("start, after %v: %w", time.Since(t0).Round(time.Millisecond), err)
	}
	f.opened = time.Since(t0)
	logf("%s: %d campaigns open after %v", f.algo, n*len(c.procs), f.opened.Round(time.Millisecond))
	leads, at, res, err := pollAgreed(ctx, c, names, timeout)
	if err != nil {
		return fmt.Errorf("start, %v after the campaigns opened: %w", f.opened.Round(time.Millisecond), err)
	}
	f.agreed, f.agreedRes = at.Sub(t0), res
	for _, p := range c.procs {
		f.started = append(f.started, fmt.Sprintf("node %d: %s", p.id, sendStats(p)))
	}
	profiledStart()
	f.restSpread = spreadString(leads, nodes)
	logf("%s: agreed after %v (poll %v): %s", f.algo, f.agreed.Round(time.Millisecond), res.Round(time.Millisecond), f.restSpread)

	// idle with n.
	time.Sleep(settle)
	f.idle, f.idleHeap = idleUsage(c, window)
	logf("%s: idle %s", f.algo, usageLine(f.idle, f.idleHeap))
	if f.spread && gaps > 0 {
		// handovers one at a time: the leaderless time the return's may not exceed.
		if leads, _, _, err = pollAgreed(ctx, c, names, timeout); err != nil {
			return fmt.Errorf("before the handovers: %w", err)
		}
		if f.handoverGaps, err = measureHandovers(ctx, c, names, leads, max(gaps/2, 1)); err != nil {
			return fmt.Errorf("handovers: %w", err)
		}
		logf("%s: handovers at rest, leaderless time per election: %s", f.algo, f.handoverGaps)
	}

	// crash: the node leading the most.
	if leads, _, _, err = pollAgreed(ctx, c, names, timeout); err != nil {
		return fmt.Errorf("before the crash: %w", err)
	}
	f.preCrashSpread = spreadString(leads, nodes)
	var victim *proc
	err = f.crash.measure(ctx, c, names, leads, watch, "ELECTBENCH_CRASH_PROFILES", func(id uint64) {
		victim = c.proc(id)
		c.kill(victim)
		apps.drop(id)
	})
	if err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	logf("%s: crash of node %d (leading %d): %s", f.algo, f.crash.victim, f.crash.led, f.crash.line())
	time.Sleep(settle)
	var lists []nodeList
	for _, p := range running(c) {
		lists = append(lists, listOf(ctx, p))
	}
	after, reason := agreement(lists, names)
	f.crash.leaderless = leaderless(lists, names, f.crash.victim)
	if after == nil {
		logf("%s: after the crash: %s", f.algo, reason)
		f.crashSpread = "not agreed: " + reason
	} else {
		f.crashSpread = spreadString(after, nodes)
	}

	// return.
	var returnGaps *gapWatches
	if f.spread && gaps > 0 {
		var sample []string
		for _, name := range names {
			if len(sample) < gaps && leads[name].id == victim.id {
				sample = append(sample, name)
			}
		}
		if returnGaps, err = watchGaps(c, running(c), sample); err != nil {
			return fmt.Errorf("return: %w", err)
		}
		defer returnGaps.stop()
	}
	rejoinVia(c, victim)
	t0 = time.Now()
	if err := c.start(victim); err != nil {
		return err
	}
	if err := waitJoined(victim, 30*time.Second); err != nil {
		return fmt.Errorf("return: %w", err)
	}
	if err := apps.standAll(ctx, []*proc{victim}, append([]string{"base"}, names...)); err != nil {
		return fmt.Errorf("return: %w", err)
	}
	back, at, _, err := pollAgreed(ctx, c, names, timeout)
	if err != nil {
		return fmt.Errorf("return: %w", err)
	}
	f.returned = at.Sub(t0)
	if after != nil {
		f.movedBack = moved(after, back)
	}
	f.returnSpread = spreadString(back, nodes)
	logf("%s: returned, agreed after %v, %d moved: %s", f.algo, f.returned.Round(time.Millisecond), f.movedBack, f.returnSpread)
	if f.spread && after != nil {
		measureRebalance(ctx, c, f, names, nodes, after, t0)
	}
	if returnGaps != nil {
		f.returnGaps = returnGaps.figure(time.Now())
		returnGaps.stop()
		logf("%s: return, leaderless time per election until balanced: %s", f.algo, f.returnGaps)
		logf("%s: return, the gaps by the second they began in after the restart (gaps, longest ms): %s", f.algo, returnGaps.timeline(t0))
	}

	// the app's death: the app on the node leading the most.
	if back, _, _, err = pollAgreed(ctx, c, names, timeout); err != nil {
		return fmt.Errorf("before the app's death: %w", err)
	}
	err = f.appCrash.measure(ctx, c, names, back, watch, "", apps.crash)
	if err != nil {
		return fmt.Errorf("the app's death: %w", err)
	}
	logf("%s: death of node %d's app (leading %d): %s", f.algo, f.appCrash.victim, f.appCrash.led, f.appCrash.line())
	time.Sleep(settle)
	lists = lists[:0]
	for _, p := range running(c) {
		lists = append(lists, listOf(ctx, p))
	}
	f.appCrash.leaderless = leaderless(lists, names, f.appCrash.victim)
	return nil
}

// rebalanceWithin is how long after a node's return the leaderships of
// spread elections must be balanced again (issue 27: 30 s).
const rebalanceWithin = 30 * time.Second

// spreadImbalance is the imbalance the nodes rebalance to (their
// spread-imbalance default): max/min ≤ 1 + spreadImbalance.
const spreadImbalance = 0.1

// measureRebalance polls every node's elections from the return's agreement
// until their leaderships are balanced, or rebalanceWithin after the
// restart at t0: when, how many moved from the state after the crash
// (against the least that balances it), and how many elections some node
// showed leaderless in a poll meanwhile (a handover's gap is shorter than
// a poll: this counts the longer ones, and some of those).
func measureRebalance(ctx context.Context, c *cluster, f *shardsFig, names []string, nodes []uint64, after map[string]lead, t0 time.Time) {
	f.balanceMin = minMoves(after, nodes)
	seen := map[string]bool{}
	var polls samples
	for time.Since(t0) < rebalanceWithin {
		var lists []nodeList
		sent := time.Now()
		for _, p := range running(c) {
			lists = append(lists, listOf(ctx, p))
		}
		polls = append(polls, time.Since(sent))
		for _, name := range names {
			for _, l := range lists {
				if l.err == nil && l.leads[name].id == 0 {
					seen[name] = true
				}
			}
		}
		if agreed, _ := agreement(lists, names); agreed != nil && balanced(agreed, nodes, spreadImbalance) {
			f.balanced = time.Since(t0)
			f.balanceMoved = moved(after, agreed)
			f.balanceSpread = spreadString(agreed, nodes)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.seenLeaderless, f.balancePoll = len(seen), polls.pct(0.5)
	logf("%s: balanced after %v (0: not within %v), %d moved (least %d), %d seen leaderless: %s", f.algo,
		f.balanced.Round(time.Millisecond), rebalanceWithin, f.balanceMoved, f.balanceMin, f.seenLeaderless, f.balanceSpread)
}

// idleUsage samples every running node's CPU and RSS over window, and its
// Go heap at the end.
func idleUsage(c *cluster, window time.Duration) ([]procUsage, []float64) {
	us := sample([]*cluster{c}, window)[0]
	heap := make([]float64, len(us))
	for i, u := range us {
		heap[i] = heapMiB(c.proc(u.id))
	}
	return us, heap
}

func usageLine(us []procUsage, heap []float64) string {
	var parts []string
	for i, u := range us {
		parts = append(parts, fmt.Sprintf("n%d %.1f%% %.1f/%.1f MiB", u.id, u.cpu, float64(u.rss)/1024, heap[i]))
	}
	return strings.Join(parts, ", ")
}

// failoverPollEvery spaces the polls of a failover's every election. A
// poll of thousands of elections costs the observer node, and the
// benchmark's process beside it, CPU that the failover it measures needs:
// back to back (every 5-70 ms), they made the WatchLeader sample's p99 at
// 2,000 elections a fifth longer than with a poll every 100 ms, side by
// side.
const failoverPollEvery = 100 * time.Millisecond

// pollNewLeaders polls p's ListElections, a poll starting at most every
// failoverPollEvery, until every one of names shows a leader other than the
// one in old with a higher term, or until timeout; each election's sample
// is the arrival of the first answer that showed it, less t0. It returns the
// samples, how many never changed, and the longest time between two
// answers, the first counted from t0 (the samples' resolution).
func pollNewLeaders(ctx context.Context, p *proc, names []string, old map[string]lead, t0 time.Time, timeout time.Duration) (samples, int, time.Duration) {
	left := map[string]bool{}
	for _, n := range names {
		left[n] = true
	}
	var out, gaps samples
	var next time.Time
	last := t0
	end := t0.Add(timeout)
	for len(left) > 0 && time.Now().Before(end) {
		if wait := min(time.Until(next), time.Until(end)); wait > 0 {
			time.Sleep(wait)
		}
		next = time.Now().Add(failoverPollEvery)
		l := listOf(ctx, p)
		if l.err != nil {
			continue
		}
		gaps, last = append(gaps, l.got.Sub(last)), l.got
		for name := range left {
			v, o := l.leads[name], old[name]
			if v.id != 0 && v.id != o.id && v.term > o.term {
				out = append(out, l.got.Sub(t0))
				delete(left, name)
			}
		}
	}
	return out, len(left), gaps.pct(1)
}

// clusterLogs counts every node's log lines by message.
func clusterLogs(c *cluster) []string {
	var all strings.Builder
	for _, p := range c.procs {
		b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", p.id)))
		all.Write(b)
		all.WriteByte('\n')
	}
	return logCounts(all.String())
}

func shardsReport(pr func(string, ...any), figs []*shardsFig) {
	for _, f := range figs {
		pr("## %s, %d elections\n\n", f.algo, f.elections)
		if f.stopped != "" {
			pr("**stopped**: %s\n\n", f.stopped)
		}
		pr("| figure | value |\n|---|---|\n")
		if f.opened > 0 {
			pr("| start: all campaigns registered | %s ms |\n", ms(f.opened))
		}
		if f.agreed > 0 {
			pr("| start: every node agrees on every election | %s ms (resolution: one poll round, %s ms) |\n", ms(f.agreed), ms(f.agreedRes))
			pr("| leaders per node when the start agreed | %s |\n", f.restSpread)
			pr("| leaders per node at rest, before the crash | %s |\n", f.preCrashSpread)
		}
		cpu := func(us []procUsage) []float64 {
			var v []float64
			for _, u := range us {
				v = append(v, u.cpu)
			}
			return v
		}
		mib := func(us []procUsage) []float64 {
			var v []float64
			for _, u := range us {
				v = append(v, float64(u.rss)/1024)
			}
			return v
		}
		if len(f.base) > 0 {
			pr("| idle CPU per node, 1 election (%% of a core) | median %.2f, %s |\n", medianF(cpu(f.base)), floats(cpu(f.base)))
			pr("| RSS / Go heap in use per node, 1 election (MiB) | %.1f / %.1f |\n", medianF(mib(f.base)), medianF(f.baseHeap))
		}
		if len(f.idle) > 0 {
			pr("| idle CPU per node, %d elections (%% of a core) | median %.2f, %s |\n", f.elections, medianF(cpu(f.idle)), floats(cpu(f.idle)))
			pr("| RSS / Go heap in use per node, %d elections (MiB) | %.1f / %.1f |\n", f.elections, medianF(mib(f.idle)), medianF(f.idleHeap))
			perRSS := (medianF(mib(f.idle)) - medianF(mib(f.base))) * 1024 * 1024 / float64(f.elections)
			perHeap := (medianF(f.idleHeap) - medianF(f.baseHeap)) * 1024 * 1024 / float64(f.elections)
			pr("| memory per election per node (RSS / heap, bytes) | %.0f / %.0f |\n", perRSS, perHeap)
		}
		if f.crash.victim != 0 {
			pr("| crash: SIGKILLed node, elections it led | node %d, %d |\n", f.crash.victim, f.crash.led)
			f.crash.report(pr, "crash", "the dead node")
			pr("| leaders per node after the crash | %s |\n", f.crashSpread)
		}
		if f.returned > 0 {
			pr("| return: restart until every node agrees on every election | %s ms |\n", ms(f.returned))
			pr("| return: leaderships moved | %d |\n", f.movedBack)
			pr("| leaders per node after the return | %s |\n", f.returnSpread)
		}
		if f.spread {
			if f.balanced > 0 {
				pr("| return: balanced (max/min ≤ %.1f) after the restart | %s ms |\n", 1+spreadImbalance, ms(f.balanced))
			} else {
				pr("| return: balanced (max/min ≤ %.1f) after the restart | not within %v |\n", 1+spreadImbalance, rebalanceWithin)
			}
			pr("| return: leaderships moved from the crash's state until balanced, and the least that balances it | %d, %d |\n", f.balanceMoved, f.balanceMin)
			pr("| return: elections some node showed leaderless in a poll until balanced (polls of %s ms) | %d |\n", ms(f.balancePoll), f.seenLeaderless)
			pr("| leaders per node when balanced | %s |\n", f.balanceSpread)
			pr("| handovers at rest, one at a time: leaderless time per election (WatchLeader on every node) | %s |\n", f.handoverGaps)
			pr("| return: leaderless time per election of the crashed node's until balanced (WatchLeader on every other node) | %s |\n", f.returnGaps)
		}
		if f.appCrash.victim != 0 {
			pr("| app's death: the app on node %d (its connection closed), elections it led | %d |\n", f.appCrash.victim, f.appCrash.led)
			f.appCrash.report(pr, "app's death", "its node")
		}
		pr("\nPeer messages when the start agreed (/metrics of each node):\n\n")
		for _, l := range f.started {
			pr("- %s\n", l)
		}
		pr("\nPeer messages at the end (/metrics of each running node):\n\n")
		for _, l := range f.sends {
			pr("- %s\n", l)
		}
		pr("\nNode log lines (warn and above, all nodes), by message:\n\n")
		if len(f.logs) == 0 {
			pr("- none\n")
		}
		for _, l := range f.logs[:min(len(f.logs), 12)] {
			pr("- %s\n", l)
		}
		pr("\n")
	}
}
