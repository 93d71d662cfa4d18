package main

// vsetcd shards: etcd's election API in the shape of `electbench shards`.
// An etcd cluster (--members, default one per candidate); --candidates
// candidate processes (`vsetcd shardcand`, this binary, shardcand.go),
// candidate i through member i, each with ONE session (one lease, --ttl)
// on which it campaigns in every one of --elections elections, at most
// --inflight campaigns registering at once (window.go).
//
//	go -C tools run ./cmd/vsetcd shards [--elections 10000] [--ttl 10] [--members 5] [--inflight 64] [--out file]
//
// Figures: time until every election has a leader that knows it (the
// candidates report each campaign that returns as leader) and until every
// campaign is registered; idle CPU and RSS of the members and candidates
// over --window; SIGKILL of the candidate leading the most elections: when
// its keys are deleted (its lease expires, so a failover is bounded below
// by the TTL less the time since its last keep-alive), per election the
// time until another candidate's campaign returns as leader, and the
// elections still led by it, or by nobody, after --settle. A candidate
// whose session expires exits and stops the run: that TTL is too short for
// the load, and the report says so rather than starting a new session.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// mainShards runs `vsetcd shards` or `vsetcd shardcand` and exits.
func mainShards() {
	sigs := make(chan os.Signal, 1)
	var err error
	if os.Args[1] == "shardcand" {
		err = shardCandMain(os.Args[2:])
	} else {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			s := <-sigs
			logf("%v: killing everything", s)
			cleanUp()
			os.Exit(130)
		}()
		err = shardsMain(os.Args[2:])
		cleanUp()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsetcd:", err)
		os.Exit(1)
	}
}

const shardsPrefix = "/vsetcd/shards/"

// shardName is election i's name, as electbench shards names its own.
func shardName(i, n int) string {
	return fmt.Sprintf("shard-%0*d", max(len(fmt.Sprint(n-1)), 5), i)
}

// shardsView is one ranged Get: every election's leader (value of its
// lowest-create-revision key) and how many keys (candidates) it has.
type shardsView struct {
	leader     map[string]string
	candidates map[string]int
	owner      map[string]string // key: its value (the candidate)
	rev        int64             // the Get's revision
	sent, got  time.Time
}

// parseShards folds a ranged Get's keys into a shardsView: key is
// prefix/election/lease, the lowest create revision of an election leads.
func parseShards(kvs []shardKV) (leader map[string]string, candidates map[string]int) {
	leader, candidates = map[string]string{}, map[string]int{}
	rev := map[string]int64{}
	for _, kv := range kvs {
		rest, ok := strings.CutPrefix(kv.key, shardsPrefix)
		if !ok {
			continue
		}
		el, _, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		candidates[el]++
		if r, seen := rev[el]; !seen || kv.createRev < r {
			rev[el], leader[el] = kv.createRev, kv.value
		}
	}
	return leader, candidates
}

type shardKV struct {
	key, value string
	createRev  int64
}

func getShards(ctx context.Context, cli *clientv3.Client) (shardsView, error) {
	v := shardsView{sent: time.Now()}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r, err := cli.Get(cctx, shardsPrefix, clientv3.WithPrefix())
	v.got = time.Now()
	if err != nil {
		return v, err
	}
	kvs := make([]shardKV, len(r.Kvs))
	v.owner = make(map[string]string, len(r.Kvs))
	for i, kv := range r.Kvs {
		kvs[i] = shardKV{string(kv.Key), string(kv.Value), kv.CreateRevision}
		v.owner[kvs[i].key] = kvs[i].value
	}
	v.leader, v.candidates = parseShards(kvs)
	v.rev = r.Header.Revision
	return v, nil
}

// usage is a process's CPU (percent of a core) over a window, and its RSS.
type usage struct {
	name string
	cpu  float64
	rss  float64 // MiB
}

func procTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func procRSS(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// sampleUsage measures the named children over window (USER_HZ = 100).
func sampleUsage(cs map[string]*child, window time.Duration) []usage {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range cs {
			if !yield(k) {
				return
			}
		}
	})
	t0 := map[string]int64{}
	for _, n := range names {
		t0[n] = procTicks(cs[n].cmd.Process.Pid)
	}
	start := time.Now()
	time.Sleep(window)
	el := time.Since(start).Seconds()
	var out []usage
	for _, n := range names {
		pid := cs[n].cmd.Process.Pid
		out = append(out, usage{n, float64(procTicks(pid)-t0[n]) / el, procRSS(pid)})
	}
	return out
}

func usageString(us []usage) string {
	var s []string
	for _, u := range us {
		s = append(s, fmt.Sprintf("%s %.1f%% %.0f MiB", u.name, u.cpu, u.rss))
	}
	return strings.Join(s, ", ")
}

// wins collects the candidates' "won" lines: per election, the times a
// candidate reported leading it.
type wins struct {
	mu    sync.Mutex
	first map[string]time.Time // election: its first win
	after map[string]time.Time // election: first win after the kill, by another candidate
	kill  time.Time
	dead  string
}

func (w *wins) add(cand, el string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.first[el]; !ok {
		w.first[el] = at
	}
	if w.dead != "" && cand != w.dead && !at.Before(w.kill) {
		if _, ok := w.after[el]; !ok {
			w.after[el] = at
		}
	}
}

// counts is how many elections have had a leader, and a new one since the kill.
func (w *wins) counts() (first, after int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.first), len(w.after)
}

func shardsMain(args []string) (err error) {
	fs := flag.NewFlagSet("vsetcd shards", flag.ExitOnError)
	n := fs.Int("elections", 10000, "elections every candidate campaigns in")
	nc := fs.Int("candidates", 5, "candidate processes (candidate i through member i, members taken in turn)")
	members := fs.Int("members", 0, "etcd members (0: as many as candidates)")
	ttl := fs.Int("ttl", 10, "session TTL, seconds (each candidate's one lease; a failover waits for it to expire)")
	inflight := fs.Int("inflight", 64, "campaigns each candidate registers at once, at most (halved on too-many-requests)")
	window := fs.Duration("window", 10*time.Second, "idle measurement window")
	settle := fs.Duration("settle", 5*time.Second, "after the start and after the kill's failover, before measuring")
	etcdBin := fs.String("etcd", "etcd", "the etcd server binary")
	out := fs.String("out", "", "also write the report to this file")
	fs.Parse(args)
	if *members == 0 {
		*members = *nc
	}
	dir, err := os.MkdirTemp("", "vsetcd-shards-")
	if err != nil {
		return err
	}
	cleanup.dir = dir
	var w strings.Builder
	pr := func(f string, a ...any) { fmt.Fprintf(&w, f, a...); fmt.Printf(f, a...) }
	defer func() {
		if err != nil {
			pr("\n**stopped**: %v\n\nload average at the end %s\n", err, loadavg())
		}
		if *out != "" {
			os.WriteFile(*out, []byte(w.String()), 0o644)
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	e, err := startEtcd(*etcdBin, "", dir, 0, *members, int64(*ttl), nil)
	if err != nil {
		return err
	}
	defer e.stop()
	pr("# vsetcd shards: %d elections × %d candidates on etcd\n\n`vsetcd %s`\n\n", *n, *nc, strings.Join(os.Args[1:], " "))
	pr("- %s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), loadavg())
	pr("- etcd %s, %d members, data in %s; %d candidate processes, candidate i through member i, each ONE concurrency.NewSession(WithTTL(%d)) and a campaign per election on it (Election.Campaign's steps), at most %d registering at once per candidate (halved on too-many-requests, +1 per success), a failed request retried after a backoff\n",
		e.version, *members, os.TempDir(), *nc, *ttl, *inflight)
	pr("- leaders: each candidate's campaign returning (its \"won\" line, wall clock of this host); confirmed by one ranged Get of the prefix on member 1 (leader: lowest create revision)\n\n")
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.endpoints[:1], DialTimeout: 5 * time.Second, Logger: zap.NewNop(), MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	servers := map[string]*child{}
	for i, s := range e.servers {
		servers[fmt.Sprintf("e%d", i+1)] = s
	}
	base := sampleUsage(servers, *window)
	pr("| figure | value |\n|---|---|\n")
	pr("| idle, no elections: members (CPU %% of a core, RSS) | %s |\n", usageString(base))

	cands := map[string]*child{}
	ws := &wins{first: map[string]time.Time{}, after: map[string]time.Time{}}
	ready := make(chan string, *nc)
	gone := make(chan string, *nc) // a candidate that exited
	var stats sync.Map             // candidate: its ready line's numbers
	var lost sync.Map              // candidate: when it saw its session expire
	t0 := time.Now()
	for i := 1; i <= *nc; i++ {
		name := fmt.Sprintf("c%d", i)
		lw := &lineWriter{fn: func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "won":
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				ws.add(name, f[1], time.Unix(0, ns))
			case len(f) == 4 && f[0] == "ready":
				stats.Store(name, fmt.Sprintf("%s retries, %s halvings, window %s", f[1], f[2], f[3]))
				ready <- name
			case len(f) == 2 && f[0] == "lost":
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				lost.Store(name, time.Unix(0, ns))
			default:
				logf("%s: %s", name, line)
			}
		}}
		logw, err := logFile(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		c, err := startChild(self, []string{"shardcand", "--endpoint", e.endpoints[(i-1)%len(e.endpoints)], "--name", name,
			"--elections", fmt.Sprint(*n), "--ttl", fmt.Sprint(*ttl), "--inflight", fmt.Sprint(*inflight)}, lw, logw,
			func(*child) { gone <- name })
		if err != nil {
			return err
		}
		cands[name] = c
	}
	// Candidates end first (SIGTERM: each revokes its lease), then the
	// members; with the members gone first they would report lost sessions.
	defer func() {
		for _, c := range cands {
			c.signal(syscall.SIGTERM)
		}
		for _, c := range cands {
			c.stop(syscall.SIGTERM, 5*time.Second)
		}
	}()
	died := func(name string) error {
		if at, ok := lost.Load(name); ok {
			return fmt.Errorf("candidate %s's session (its %d s lease) expired %s ms after the candidates started: the TTL is too short for this load, raise --ttl",
				name, *ttl, ms(at.(time.Time).Sub(t0)))
		}
		b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
		return fmt.Errorf("candidate %s exited: %s", name, strings.TrimSpace(string(b)))
	}
	var tReady time.Time
	for range *nc {
		select {
		case <-ready:
			tReady = time.Now()
		case name := <-gone:
			return died(name)
		case <-time.After(5*time.Minute - time.Since(t0)):
			first, _ := ws.counts()
			return fmt.Errorf("start: not every campaign registered within 5 min (%d of %d elections have a leader)", first, *n)
		}
	}
	var tLeaders time.Time
	for first, _ := ws.counts(); first < *n; first, _ = ws.counts() {
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("start: %d of %d elections have a leader after 5 min", first, *n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ws.mu.Lock()
	for _, at := range ws.first {
		if at.After(tLeaders) {
			tLeaders = at
		}
	}
	ws.mu.Unlock()
	v, err := getShards(ctx, cli)
	if err != nil {
		return err
	}
	full := 0
	for _, c := range v.candidates {
		if c == *nc {
			full++
		}
	}
	pr("| start: every election has a leader that knows it (last campaign to return as leader) | %s ms |\n", ms(tLeaders.Sub(t0)))
	pr("| start: every campaign of every candidate registered (key written, key below read) | %s ms |\n", ms(tReady.Sub(t0)))
	var st []string
	for i := 1; i <= *nc; i++ {
		s, _ := stats.Load(fmt.Sprintf("c%d", i))
		st = append(st, fmt.Sprintf("c%d %v", i, s))
	}
	pr("| start: per candidate | %s |\n", strings.Join(st, "; "))
	pr("| start: Get after that: elections with a leader, with every candidate's key | %d, %d (Get %s ms) |\n", len(v.leader), full, ms(v.got.Sub(v.sent)))
	per := map[string]int{}
	for _, l := range v.leader {
		per[l]++
	}
	pr("| leaders per candidate | %v |\n", per)
	time.Sleep(*settle)
	all := map[string]*child{}
	for k, c := range servers {
		all[k] = c
	}
	for k, c := range cands {
		all[k] = c
	}
	idle := sampleUsage(all, *window)
	select {
	case name := <-gone:
		return died(name)
	default:
	}
	pr("| idle, %d elections: members and candidates (CPU %% of a core, RSS) | %s |\n", *n, usageString(idle))
	var memb float64
	for i, u := range idle {
		if strings.HasPrefix(u.name, "e") {
			memb += u.rss - base[min(i, len(base)-1)].rss
		}
	}
	pr("| member memory per election (RSS with − without, all members / %d elections / %d members) | %.0f bytes |\n", *n, len(servers), memb*1024*1024/float64(*n)/float64(len(servers)))
	return shardsKill(ctx, cli, cands, ws, gone, died, pr, *n, *ttl, *settle)
}

// shardsKill SIGKILLs the candidate leading the most elections and reports
// the failover: when its keys were deleted (its lease expired; a watch of
// the prefix on member 1), and per election it led, when another
// candidate's campaign returned as leader.
func shardsKill(ctx context.Context, cli *clientv3.Client, cands map[string]*child, ws *wins, gone chan string, died func(string) error,
	pr func(string, ...any), n, ttl int, settle time.Duration) error {
	v, err := getShards(ctx, cli)
	if err != nil {
		return err
	}
	per := map[string]int{}
	for _, l := range v.leader {
		per[l]++
	}
	victim, led := "", 0
	for _, name := range slices.Sorted(maps.Keys(per)) {
		if per[name] > led {
			victim, led = name, per[name]
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var delMu sync.Mutex
	var dels []time.Time
	wch := cli.Watch(wctx, shardsPrefix, clientv3.WithPrefix(), clientv3.WithRev(v.rev+1))
	go func() {
		for wr := range wch {
			at := time.Now()
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && v.owner[string(ev.Kv.Key)] == victim {
					delMu.Lock()
					dels = append(dels, at)
					delMu.Unlock()
				}
			}
		}
	}()
	ws.mu.Lock()
	ws.kill, ws.dead = time.Now(), victim
	t0 := ws.kill
	ws.mu.Unlock()
	syscall.Kill(cands[victim].cmd.Process.Pid, syscall.SIGKILL)
	<-cands[victim].exited
	<-gone // the victim's own exit
	deadline := t0.Add(time.Duration(ttl)*time.Second + 30*time.Second)
	var failed error // a survivor's session expired during the failover
wait:
	for _, after := ws.counts(); after < led && time.Now().Before(deadline); _, after = ws.counts() {
		select {
		case name := <-gone:
			failed = died(name)
			break wait
		case <-time.After(10 * time.Millisecond):
		}
	}
	var got []time.Duration
	ws.mu.Lock()
	for el, l := range v.leader {
		if l != victim {
			continue
		}
		if at, ok := ws.after[el]; ok {
			got = append(got, at.Sub(t0))
		}
	}
	ws.mu.Unlock()
	delMu.Lock()
	nd := len(dels)
	var d0, d1 time.Duration
	if nd > 0 {
		d0, d1 = dels[0].Sub(t0), dels[nd-1].Sub(t0)
	}
	delMu.Unlock()
	pr("| crash: SIGKILLed candidate, elections it led (session TTL %d s) | %s, %d |\n", ttl, victim, led)
	pr("| crash: its keys deleted (lease expired), watch on member 1 | %d of %d keys, first %s ms, last %s ms after the kill |\n", nd, n, ms(d0), ms(d1))
	pr("| crash: new leader's campaign returns, per election it led | %d: p50 %s, p99 %s, max %s ms; %d not within TTL+30 s |\n",
		len(got), ms(pct(got, 0.5)), ms(pct(got, 0.99)), ms(pct(got, 1)), led-len(got))
	if failed != nil {
		pr("| crash: stopped early | %v |\n", failed)
		return failed
	}
	time.Sleep(settle)
	if v, err = getShards(ctx, cli); err != nil {
		return err
	}
	leaderless := 0
	for i := range n {
		if l, ok := v.leader[shardName(i, n)]; !ok || l == victim {
			leaderless++
		}
	}
	pr("| crash: elections with no leader or the dead one in a Get %v later | %d |\n", settle, leaderless)
	pr("\nload average at the end %s\n", loadavg())
	return nil
}
