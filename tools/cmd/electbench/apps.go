package main

// electbench apps: the application is the candidate. Five electord nodes,
// five candidate apps (`electbench app` processes, the Go client's
// Campaign), one per node, all campaigning in the same named elections. The
// benchmark SIGKILLs the leading app (or, with --kill node, the node that
// leads) and measures, on an observer node that neither led nor was killed,
// the time from the signal until the observer's WatchLeader of each
// election shows a new leader (another value, a higher term); then it
// restarts what it killed so that every candidate stands again, waits for
// every node to agree on every election's leader, and kills again.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/tools/internal/candidate"
)

// appsResult holds one algorithm's figures: one sample per election per
// kill, and per kill the time until every election it measured had a new
// leader.
type appsResult struct {
	each, all samples
	failed    int // elections whose observer saw no new leader in time
	led       []int
	stopped   string // why the run ended before its last kill, if it did
}

func appsCmd(args []string) error {
	fs := flag.NewFlagSet("apps", flag.ExitOnError)
	cf := commonFlags(fs)
	kills := fs.Int("kills", 20, "kills per algorithm")
	nElections := fs.Int("elections", 1, "named elections every app campaigns in (1: \"jobs\"; more: jobs-000, jobs-001, ...)")
	kill := fs.String("kill", "", "what is SIGKILLed: app (the leading app) or node (the leading node, with its app); default app for one election, node for more")
	settle := fs.Duration("settle", 300*time.Millisecond, "pause once every candidate stands again and every node agrees, before the next kill")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	fs.Parse(args)
	if *kill == "" {
		*kill = "app"
		if *nElections > 1 {
			*kill = "node"
		}
	}
	if *kill != "app" && *kill != "node" {
		return fmt.Errorf("--kill: want app or node, not %q", *kill)
	}
	sb, err := cf.open(*out)
	if err != nil {
		return err
	}
	defer sb.close()
	if len(sb.bins) != 1 {
		return fmt.Errorf("apps measures one binary (--electord with one path)")
	}
	bin, pr := sb.bins[0], sb.pr
	names := electionNames(*nElections)

	pr("# electbench apps: %s killed while it leads %d named election(s)\n\n", *kill, len(names))
	pr("`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %s/%s, %d CPUs, GOMAXPROCS=%d, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
	pr("- %d electord processes, %s; %d candidate apps (`electbench app`: the Go client's Campaign, one process each), app-N through node N, priority 0\n", *cf.nodes, sb.config, *cf.nodes)
	pr("- %d SIGKILLs per algorithm of the leading %s; after each, the killed %s is restarted, every node agrees on every election's leader, then %v of settling\n", *kills, *kill, *kill, *settle)
	pr("- measured: from just before the signal until a WatchLeader stream on an observer node (a node whose app does not lead, never the killed one) shows another value at a higher term, one sample per election per kill\n")
	pr("- electord: `%s` (%s)\n", bin.path, describe(bin.path))

	res := map[string]*appsResult{}
	for _, algo := range sb.algos {
		logf("%s: %d elections, killing the leading %s %d times", algo, len(names), *kill, *kills)
		c, err := startCluster(bin.path, algo, *cf.nodes, strings.Fields(*cf.extra), logf)
		if err != nil {
			return err
		}
		r, err := measureApps(c, names, *kills, *kill == "node", *settle)
		c.stop()
		if r == nil {
			return fmt.Errorf("%s: %w", algo, err)
		}
		// A run that stopped part way still reports the kills it measured,
		// and why it stopped; the next algorithm runs on a new cluster.
		if err != nil {
			r.stopped = err.Error()
			logf("%s: stopped after %d kills: %v", algo, len(r.led), err)
		}
		res[algo] = r
	}
	pr("\n| algorithm | measured | samples | p50 ms | p90 ms | p99 ms | max ms | failed |\n")
	pr("|---|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(algo, what string, s samples, failed int) {
		pr("| %s | %s | %d | %s | %s | %s | %s | %d |\n", algo, what, len(s), ms(s.pct(0.5)), ms(s.pct(0.9)), ms(s.pct(0.99)), ms(s.pct(1)), failed)
	}
	for _, algo := range sb.algos {
		r := res[algo]
		row(algo, "each election: new leader seen by the observer", r.each, r.failed)
		if len(names) > 1 {
			row(algo, "each kill: every election it led has a new leader", r.all, 0)
		}
	}
	if len(names) > 1 {
		pr("\nElections the killed node led, kill by kill:\n\n")
		for _, algo := range sb.algos {
			pr("- %s: %v\n", algo, res[algo].led)
		}
	}
	for _, algo := range sb.algos {
		if r := res[algo]; r.stopped != "" {
			pr("\n**%s stopped after %d kills**: %s\n", algo, len(r.led), r.stopped)
		}
	}
	pr("\nload average at the end %s\n", loadavg())
	return nil
}

// electionNames names the benchmark's elections: "jobs" alone, or n names
// jobs-000, jobs-001, ... that sort in their order.
func electionNames(n int) []string {
	if n <= 1 {
		return []string{"jobs"}
	}
	w := len(fmt.Sprint(n - 1))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("jobs-%0*d", max(w, 3), i)
	}
	return names
}

// newLeader says whether ev shows a leadership after old's: another
// candidacy (value) at a higher term. A no-leader event is none.
func newLeader(old, ev *pb.LeaderInfo) bool {
	return ev.GetId() != 0 && ev.GetTerm() > old.GetTerm() && ev.GetValue() != old.GetValue()
}

// mostLed returns the node that leads the most of the elections, and how
// many (ties: the lowest id, so the choice does not depend on map order).
func mostLed(leaders map[string]*pb.LeaderInfo) (id uint64, n int) {
	count := map[uint64]int{}
	for _, li := range leaders {
		count[li.GetId()]++
	}
	for k, v := range count {
		if k != 0 && (v > n || v == n && k < id) {
			id, n = k, v
		}
	}
	return id, n
}

func measureApps(c *cluster, names []string, kills int, killNode bool, settle time.Duration) (*appsResult, error) {
	if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
		return nil, fmt.Errorf("the cluster's first election: %w", err)
	}
	apps := make([]*candidate.Proc, len(c.procs))
	defer func() {
		for _, a := range apps {
			if a != nil {
				a.Kill()
			}
		}
	}()
	startNodeApp := func(p *proc) error {
		a, err := startApp(p.id, p.api, names, fmt.Sprintf("app-%d", p.id), 0, filepath.Join(c.dir, fmt.Sprintf("app-%d.log", p.id)))
		apps[p.id-1] = a
		return err
	}
	for _, p := range c.procs {
		if err := startNodeApp(p); err != nil {
			return nil, err
		}
	}
	r := &appsResult{}
	for i := range kills {
		leaders, err := waitNamed(c, names, 30*time.Second)
		if err != nil {
			return r, fmt.Errorf("before kill %d: %w", i+1, err)
		}
		time.Sleep(settle) // let the candidacies settle after a restart
		if leaders, err = waitNamed(c, names, 30*time.Second); err != nil {
			return r, fmt.Errorf("before kill %d: %w", i+1, err)
		}
		lid, led := mostLed(leaders)
		r.led = append(r.led, led)
		observer := c.procs[int(lid)%len(c.procs)] // the next node: its app does not lead
		ws, stop, err := observe(c, observer, names, leaders, lid)
		if err != nil {
			return r, fmt.Errorf("kill %d: %w", i+1, err)
		}
		victim := c.proc(lid)
		t0 := time.Now() // before the signal: the kill returns once the process is reaped
		if killNode {
			c.kill(victim)
			a := apps[lid-1]
			select { // the app's candidacies ended with its node: it exits
			case <-a.Exited():
			case <-time.After(10 * time.Second):
				a.Kill()
			}
		} else {
			apps[lid-1].Kill()
		}
		apps[lid-1] = nil
		var last time.Duration
		failed := 0
		deadline := time.After(10 * time.Second)
		for _, w := range ws {
			select {
			case <-w.done:
				d := w.at.Sub(t0)
				r.each = append(r.each, d)
				last = max(last, d)
			case <-deadline:
				failed++
			}
		}
		stop()
		r.failed += failed
		if failed == 0 {
			r.all = append(r.all, last)
		}
		logf("kill %d: node %d's %s (leading %d of %d), observer node %d: every election had a new leader after %s ms, %d failed",
			i+1, lid, map[bool]string{true: "node", false: "app"}[killNode], led, len(names), observer.id, ms(last), failed)
		if killNode {
			rejoinVia(c, victim)
			if err := c.start(victim); err != nil {
				return r, err
			}
			// The restarted node must show some default leader (it has
			// joined) before its app campaigns; the benchmark does not wait
			// for the whole cluster to agree on the default election, which
			// it does not measure (waitNamed checks the named ones).
			if err := waitJoined(victim, 30*time.Second); err != nil {
				return r, fmt.Errorf("after restarting node %d: %w", lid, err)
			}
		}
		if err := startNodeApp(victim); err != nil {
			return r, err
		}
	}
	return r, nil
}

// electionWatch is an observer's WatchLeader stream of one election.
type electionWatch struct {
	base chan struct{} // closed once it showed the leadership before the kill
	done chan struct{} // closed once it showed a new one; at says when
	at   time.Time
}

// watchesPerConn is how many watch streams watchConns opens on one
// connection: below electord's default --max-streams (100 per connection),
// which would hold the next stream back until one ends.
const watchesPerConn = 50

// watchConns opens WatchLeader streams on c's nodes, watchesPerConn to a
// connection.
type watchConns struct {
	c     *cluster
	conns []*grpc.ClientConn
	api   map[uint64]pb.ElectorClient // each node's connection with room
	n     map[uint64]int              // streams opened on each node
}

func newWatchConns(c *cluster) *watchConns {
	return &watchConns{c: c, api: map[uint64]pb.ElectorClient{}, n: map[uint64]int{}}
}

// watch opens a stream of name's leadership on p.
func (w *watchConns) watch(ctx context.Context, p *proc, name string) (grpc.ServerStreamingClient[pb.LeaderEvent], error) {
	if w.n[p.id]%watchesPerConn == 0 {
		creds := insecure.NewCredentials()
		if w.c.pki != nil {
			creds = w.c.pki.creds()
		}
		cc, err := grpc.NewClient(p.api, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, err
		}
		w.conns = append(w.conns, cc)
		w.api[p.id] = pb.NewElectorClient(cc)
	}
	w.n[p.id]++
	stream, err := w.api[p.id].WatchLeader(ctx, &pb.WatchLeaderRequest{Election: name})
	if err != nil {
		return nil, fmt.Errorf("watch %s on node %d: %w", name, p.id, err)
	}
	return stream, nil
}

// close closes the connections (the streams' context is the caller's).
func (w *watchConns) close() {
	for _, cc := range w.conns {
		cc.Close()
	}
}

// observe opens a WatchLeader stream on p for each election that node lid
// leads in leaders, and returns once every stream has shown that
// leadership; stop closes them.
func observe(c *cluster, p *proc, names []string, leaders map[string]*pb.LeaderInfo, lid uint64) ([]*electionWatch, func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var ws []*electionWatch
	var wg sync.WaitGroup
	conns := newWatchConns(c)
	stop := func() {
		cancel()
		wg.Wait()
		conns.close()
	}
	for _, name := range names {
		old := leaders[name]
		if old.GetId() != lid {
			continue
		}
		stream, err := conns.watch(ctx, p, name)
		if err != nil {
			stop()
			return nil, nil, err
		}
		w := &electionWatch{base: make(chan struct{}), done: make(chan struct{})}
		ws = append(ws, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			based := false
			for {
				ev, err := stream.Recv()
				if err != nil {
					return
				}
				now := time.Now()
				li := ev.GetLeader()
				if !based && li.GetTerm() == old.GetTerm() && li.GetValue() == old.GetValue() {
					based = true
					close(w.base)
				}
				if newLeader(old, li) {
					w.at = now
					close(w.done)
					return
				}
			}
		}()
	}
	deadline := time.After(10 * time.Second)
	for _, w := range ws {
		select {
		case <-w.base:
		case <-deadline:
			stop()
			return nil, nil, fmt.Errorf("node %d's watches never showed node %d's leadership", p.id, lid)
		}
	}
	return ws, stop, nil
}

// waitNamed polls every running node until they all report the same leader
// (node, term, value) in every election, and returns it.
func waitNamed(c *cluster, names []string, timeout time.Duration) (map[string]*pb.LeaderInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var why string
	for ctx.Err() == nil {
		leaders, reason := agreedNamed(ctx, c, names)
		if leaders != nil {
			return leaders, nil
		}
		if reason != why {
			logf("waiting for agreement: %s", reason)
		}
		why = reason
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("no agreement on the elections' leaders within %v: %s", timeout, why)
}

func agreedNamed(ctx context.Context, c *cluster, names []string) (map[string]*pb.LeaderInfo, string) {
	leaders := map[string]*pb.LeaderInfo{}
	for _, p := range c.procs {
		if !p.isRunning() {
			continue
		}
		for _, name := range names {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			li, err := p.client.GetLeader(cctx, &pb.GetLeaderRequest{Election: name})
			cancel()
			if err != nil {
				return nil, fmt.Sprintf("node %d, %s: %v", p.id, name, err)
			}
			if li.GetId() == 0 {
				return nil, fmt.Sprintf("node %d, %s: no leader", p.id, name)
			}
			if first, ok := leaders[name]; !ok {
				leaders[name] = li
			} else if first.GetId() != li.GetId() || first.GetTerm() != li.GetTerm() || first.GetValue() != li.GetValue() {
				return nil, fmt.Sprintf("%s: node %d shows %d/%d/%s, another %d/%d/%s", name, p.id,
					li.GetId(), li.GetTerm(), li.GetValue(), first.GetId(), first.GetTerm(), first.GetValue())
			}
		}
	}
	return leaders, ""
}

// waitJoined waits until p's watch of the default election shows a leader.
func waitJoined(p *proc, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		p.mu.Lock()
		v := p.view
		p.mu.Unlock()
		if v.GetId() != 0 {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("node %d shows no leader within %v", p.id, timeout)
}

// rejoinVia gives p, if it is the node the cluster was seeded from (it has
// no --join), another node's gossip address to join when it restarts, as
// every real node is given a join list. A seed restarted without one starts
// alone and learns the members only from those that reach it; in this
// benchmark it then refused a live member's Coordinator for 30 s and more.
func rejoinVia(c *cluster, p *proc) {
	if argValue(p.args, "--join") != "" {
		return
	}
	for _, o := range c.procs {
		if o != p {
			if g := argValue(o.args, "--gossip-addr"); g != "" {
				p.args = append(p.args, "--join", g)
				return
			}
		}
	}
}

// argValue returns the value that follows flag in args ("" if none).
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
