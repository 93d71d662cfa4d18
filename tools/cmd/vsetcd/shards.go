package main

// vsetcd shards: etcd's election API in the shape of `electbench shards`.
// A 5-member etcd cluster; 5 candidate processes (`vsetcd shardcand`, this
// binary), candidate i through member i, each with ONE session (one lease,
// --ttl) on which it campaigns in every one of --elections elections
// (concurrency.NewElection(session, prefix/shard-NNNNN).Campaign). The
// harness reads every election at once with one ranged Get of the prefix
// (the leader of an election is its key with the lowest create revision,
// as Election.Leader says), so its times are exact to one Get (reported).
//
//	go -C tools run ./cmd/vsetcd shards [--elections 10000] [--ttl 2] [--window 10s] [--out file]
//
// Figures: time until every election holds every candidate's key; idle CPU
// and RSS of the members and candidates over --window; SIGKILL of the
// candidate leading the most elections: per election the time until the
// Get shows another leader (its lease must expire first), and the elections
// still led by it, or by nobody, after --settle.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
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

// shardCandMain is `vsetcd shardcand`: one candidate process, one session,
// a Campaign in every election. It prints "ready" once every Campaign has
// been issued and runs until killed (SIGTERM: it closes the session).
func shardCandMain(args []string) error {
	fs := flag.NewFlagSet("shardcand", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "etcd client endpoint")
	name := fs.String("name", "", "this candidate's value")
	n := fs.Int("elections", 10000, "elections to campaign in")
	ttl := fs.Int("ttl", 2, "session TTL, seconds")
	rate := fs.Int("rate", 2000, "Campaigns started a second")
	fs.Parse(args)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallRecvMsgSize: 256 << 20})
	if err != nil {
		return err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(*ttl))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	// All Campaigns at once (50,000 for 5 candidates × 10,000) made the
	// members answer "too many requests" and time out: start them at --rate
	// a second, and retry one that fails, as an application would.
	tick := time.NewTicker(time.Second / time.Duration(max(*rate, 1)))
	var retries atomic.Int64
	for i := range *n {
		<-tick.C
		e := concurrency.NewElection(sess, shardsPrefix+shardName(i, *n))
		go func() {
			for ctx.Err() == nil {
				err := e.Campaign(ctx, *name)
				if err == nil || ctx.Err() != nil {
					return
				}
				if retries.Add(1)%100 == 1 {
					fmt.Println("error", err, "(retrying;", retries.Load(), "retries so far)")
				}
				time.Sleep(100*time.Millisecond + time.Duration(rand.IntN(100))*time.Millisecond)
			}
		}()
	}
	tick.Stop()
	fmt.Println("ready")
	<-sigs
	cancel()
	sess.Close()
	cli.Close()
	return nil
}

// shardsView is one ranged Get: every election's leader (value of its
// lowest-create-revision key) and how many keys (candidates) it has.
type shardsView struct {
	leader     map[string]string
	candidates map[string]int
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
	for i, kv := range r.Kvs {
		kvs[i] = shardKV{string(kv.Key), string(kv.Value), kv.CreateRevision}
	}
	v.leader, v.candidates = parseShards(kvs)
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

func shardsMain(args []string) (err error) {
	fs := flag.NewFlagSet("vsetcd shards", flag.ExitOnError)
	n := fs.Int("elections", 10000, "elections every candidate campaigns in")
	nc := fs.Int("candidates", 5, "candidate processes, and etcd members (candidate i through member i)")
	ttl := fs.Int("ttl", 2, "session TTL, seconds")
	window := fs.Duration("window", 10*time.Second, "idle measurement window")
	settle := fs.Duration("settle", 5*time.Second, "after the kill's failover, before counting elections still led by the dead candidate")
	etcdBin := fs.String("etcd", "etcd", "the etcd server binary")
	rate := fs.Int("rate", 2000, "Campaigns each candidate starts a second (all at once overloads the members)")
	out := fs.String("out", "", "also write the report to this file")
	fs.Parse(args)
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
	e, err := startEtcd(*etcdBin, "", dir, 0, *nc, int64(*ttl), nil)
	if err != nil {
		return err
	}
	defer e.stop()
	pr("# vsetcd shards: %d elections × %d candidates on etcd\n\n`vsetcd %s`\n\n", *n, *nc, strings.Join(os.Args[1:], " "))
	pr("- %s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), loadavg())
	pr("- etcd %s, %d members; %d candidate processes, candidate i through member i, each ONE concurrency.NewSession(WithTTL(%d)) and a Campaign per election on it, started at %d a second, a failed one retried\n",
		e.version, *nc, *nc, *ttl, *rate)
	pr("- observed by one ranged Get of the prefix on member 1 (leader: lowest create revision), exact to one Get\n\n")
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
	var mu sync.Mutex
	ready := make(chan string, *nc)
	gone := make(chan string, *nc) // a candidate that exited
	t0 := time.Now()
	for i := 1; i <= *nc; i++ {
		name := fmt.Sprintf("c%d", i)
		lw := &lineWriter{fn: func(line string) {
			if line == "ready" {
				ready <- name
			} else {
				logf("%s: %s", name, line)
			}
		}}
		logw, err := logFile(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		c, err := startChild(self, []string{"shardcand", "--endpoint", e.endpoints[(i-1)%len(e.endpoints)], "--name", name,
			"--elections", fmt.Sprint(*n), "--ttl", fmt.Sprint(*ttl), "--rate", fmt.Sprint(*rate)}, lw, logw, func(*child) { gone <- name })
		if err != nil {
			return err
		}
		mu.Lock()
		cands[name] = c
		mu.Unlock()
	}
	for range *nc {
		select {
		case <-ready:
		case name := <-gone:
			b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			return fmt.Errorf("candidate %s exited before it campaigned: %s", name, strings.TrimSpace(string(b)))
		}
	}
	var v shardsView
	for {
		if v, err = getShards(ctx, cli); err != nil {
			logf("get: %v", err)
			if time.Since(t0) > 5*time.Minute {
				return err
			}
			continue
		}
		full := 0
		for _, c := range v.candidates {
			if c == *nc {
				full++
			}
		}
		if full == *n && len(v.leader) == *n {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("start: %d of %d elections hold every candidate after 5 min", full, *n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pr("| start: every election holds every candidate's key | %s ms (resolution: one Get, %s ms) |\n", ms(v.got.Sub(t0)), ms(v.got.Sub(v.sent)))
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
	pr("| idle, %d elections: members and candidates (CPU %% of a core, RSS) | %s |\n", *n, usageString(idle))
	var memb float64
	for i, u := range idle {
		if strings.HasPrefix(u.name, "e") {
			memb += u.rss - base[min(i, len(base)-1)].rss
		}
	}
	pr("| member memory per election (RSS with − without, all members / %d elections / %d members) | %.0f bytes |\n", *n, len(servers), memb*1024*1024/float64(*n)/float64(len(servers)))

	// kill the candidate leading the most.
	if v, err = getShards(ctx, cli); err != nil {
		return err
	}
	per = map[string]int{}
	for _, l := range v.leader {
		per[l]++
	}
	victim, led := "", 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range per {
			if !yield(k) {
				return
			}
		}
	}) {
		if per[name] > led {
			victim, led = name, per[name]
		}
	}
	old := v.leader
	t0 = time.Now()
	syscall.Kill(cands[victim].cmd.Process.Pid, syscall.SIGKILL)
	<-cands[victim].exited
	left := map[string]bool{}
	for el, l := range old {
		if l == victim {
			left[el] = true
		}
	}
	var got []time.Duration
	var polls []time.Duration
	for len(left) > 0 && time.Since(t0) < time.Duration(*ttl)*time.Second+30*time.Second {
		v, err := getShards(ctx, cli)
		if err != nil {
			logf("get: %v", err)
			continue
		}
		polls = append(polls, v.got.Sub(v.sent))
		for el := range left {
			if l, ok := v.leader[el]; ok && l != victim {
				got = append(got, v.got.Sub(t0))
				delete(left, el)
			}
		}
	}
	pr("| crash: SIGKILLed candidate, elections it led | %s, %d |\n", victim, led)
	pr("| crash: new leader in the Get (Gets of median %s ms) | %d: p50 %s, p99 %s, max %s ms; %d not within TTL+30 s |\n",
		ms(pct(polls, 0.5)), len(got), ms(pct(got, 0.5)), ms(pct(got, 0.99)), ms(pct(got, 1)), len(left))
	time.Sleep(*settle)
	if v, err = getShards(ctx, cli); err != nil {
		return err
	}
	leaderless := 0
	for i := range *n {
		if l, ok := v.leader[shardName(i, *n)]; !ok || l == victim {
			leaderless++
		}
	}
	pr("| crash: elections with no leader or the dead one after %v more | %d |\n", *settle, leaderless)
	pr("\nload average at the end %s\n", loadavg())
	return nil
}
