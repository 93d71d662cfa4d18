package main

// idle and scale: what electord costs at rest, and how it does with many
// processes on one machine (issue 10, item 8).
//
//	electbench idle  [--nodes 5] [--algorithms bully] [--window 30s] [--settle 5s]
//	                 [--electord [label=]path,...] [--rounds 1] [--out file]
//	electbench scale [--nodes 32,64,128] [--algorithms bully,ring] [--kills 5]
//	                 [--window 20s] [--args "..."] [--out file]
//
// scale also counts the leader or term changes the nodes' watches report
// during the idle window: on an idle cluster every one is spurious.
//
// CPU is utime+stime from /proc/<pid>/stat (every thread of the process)
// over the window, as a percentage of one core; RSS is VmRSS from
// /proc/<pid>/status at the end of the window, and idle also reports its
// RssAnon: the memory private to the process (heap, stacks, the runtime's
// own), where the rest of RSS is pages of files, mostly of the electord
// binary, which every process of the same binary shares.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

// clockTicks is USER_HZ, the unit of utime and stime: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// cpuTicks reads utime+stime of pid, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is field 14
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + st, nil
}

// rssKB reads VmRSS and RssAnon of pid, in KiB.
func rssKB(pid int) (rss, anon int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	kB := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = kB(v)
		} else if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kB(v)
		}
	}
	return rss, anon
}

// procUsage is one process's cost over a window.
type procUsage struct {
	id     uint64
	cpu    float64 // percent of one core
	rss    int64   // KiB
	anon   int64   // KiB of rss: RssAnon
	leader bool
}

// sample measures every running process of the clusters over window, all at
// once, so that the clusters meet the same host load.
func sample(clusters []*cluster, window time.Duration) [][]procUsage {
	type ref struct {
		p   *proc
		pid int
		t0  int64
	}
	refs := make([][]ref, len(clusters))
	start := time.Now()
	for i, c := range clusters {
		for _, p := range c.procs {
			if !p.isRunning() {
				continue
			}
			pid := p.cmd.Process.Pid
			t, err := cpuTicks(pid)
			if err != nil {
				continue
			}
			refs[i] = append(refs[i], ref{p, pid, t})
		}
	}
	time.Sleep(window)
	el := time.Since(start).Seconds()
	out := make([][]procUsage, len(clusters))
	for i, c := range clusters {
		li, _, _ := c.agreed(anyLeader)
		for _, r := range refs[i] {
			t, err := cpuTicks(r.pid)
			if err != nil {
				continue
			}
			u := procUsage{id: r.p.id, cpu: 100 * float64(t-r.t0) / clockTicks / el}
			u.rss, u.anon = rssKB(r.pid)
			u.leader = li != nil && li.Id == r.p.id
			out[i] = append(out[i], u)
		}
	}
	return out
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// summary of one cluster's usage: median, min and max CPU over nodes,
// the leader's CPU, median and max RSS.
type usageSummary struct {
	med, lo, hi, leader float64
	rssMed, rssMax      float64 // MiB
	anonMed             float64 // MiB
	followers           []float64
}

func summarizeUsage(us []procUsage) usageSummary {
	var cpus, rss, anon, fol []float64
	s := usageSummary{leader: -1}
	for _, u := range us {
		cpus = append(cpus, u.cpu)
		rss = append(rss, float64(u.rss)/1024)
		anon = append(anon, float64(u.anon)/1024)
		if u.leader {
			s.leader = u.cpu
		} else {
			fol = append(fol, u.cpu)
		}
	}
	if len(cpus) == 0 {
		return s
	}
	s.med, s.lo, s.hi = medianF(cpus), slices.Min(cpus), slices.Max(cpus)
	s.rssMed, s.rssMax, s.anonMed = medianF(rss), slices.Max(rss), medianF(anon)
	s.followers = fol
	return s
}

// report opens the report (stdout, and the file out unless empty) and
// names the configuration that the extra electord flags make.
func report(out, extra string) (pr func(string, ...any), config string, closeOut func(), err error) {
	w, closeOut := io.Writer(os.Stdout), func() {}
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return nil, "", nil, err
		}
		w, closeOut = io.MultiWriter(os.Stdout, f), func() { f.Close() }
	}
	config = "default config"
	if extra != "" {
		config = "default config + `" + extra + "`"
	}
	if secure {
		config += ", --secure (mutual TLS on the peer and API ports, encrypted gossip)"
	}
	return func(format string, a ...any) { fmt.Fprintf(w, format, a...) }, config, closeOut, nil
}

// idle measures the CPU of idle clusters: one cluster per binary and
// algorithm, all running at once, measured over the same window; --rounds
// repeats that with fresh clusters.
func idle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	cf := commonFlags(fs)
	window := fs.Duration("window", 30*time.Second, "measurement window")
	settle := fs.Duration("settle", 5*time.Second, "wait this long after the first agreement before measuring")
	rounds := fs.Int("rounds", 1, "fresh clusters, measured again, this many times")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	fs.Parse(args)
	sb, err := cf.open(*out)
	if err != nil {
		return err
	}
	defer sb.close()
	bins, pr, config, algos := sb.bins, sb.pr, sb.config, sb.algos
	pr("# electbench idle: CPU of idle electord processes\n\n")
	pr("`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %s/%s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadavg())
	pr("- %d processes per cluster, %s; every binary × algorithm runs its own cluster, all at once; after the first agreement and %v more, utime+stime from /proc/<pid>/stat over %v, in %% of one core\n", *cf.nodes, config, *settle, *window)
	for _, b := range bins {
		pr("- %s = `%s` (%s)\n", b.label, b.path, describe(b.path))
	}
	type key struct{ bin, algo string }
	all := map[key][]float64{}     // every node's CPU, every round
	meds := map[key][]float64{}    // per-round medians
	leaders := map[key][]float64{} // per-round leader CPU
	rss := map[key][]float64{}     // every node's RSS and RssAnon, MiB, every round
	anon := map[key][]float64{}
	for r := 1; r <= *rounds; r++ {
		var clusters []*cluster
		var keys []key
		stopAll := func() {
			for _, c := range clusters {
				c.stop()
			}
		}
		for _, b := range bins {
			for _, a := range algos {
				c, err := startCluster(b.path, a, *cf.nodes, strings.Fields(*cf.extra), logf)
				if err != nil {
					stopAll()
					return err
				}
				clusters = append(clusters, c)
				keys = append(keys, key{b.label, a})
			}
		}
		for i, c := range clusters {
			if _, _, err := c.waitAgreed(60*time.Second, anyLeader); err != nil {
				stopAll()
				return fmt.Errorf("round %d, %v: %w", r, keys[i], err)
			}
		}
		time.Sleep(*settle)
		res := sample(clusters, *window)
		stopAll()
		pr("\n## Round %d (load average after %s)\n\n", r, loadavg())
		pr("| binary | algorithm | node CPU %% median | min | max | leader CPU %% | followers' CPU %% | RSS MiB median | max | RssAnon MiB median |\n")
		pr("|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n")
		for i, k := range keys {
			s := summarizeUsage(res[i])
			var fol []string
			for _, f := range s.followers {
				fol = append(fol, fmt.Sprintf("%.2f", f))
			}
			pr("| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %.1f | %.1f | %.1f |\n", k.bin, k.algo, s.med, s.lo, s.hi, s.leader, strings.Join(fol, " "), s.rssMed, s.rssMax, s.anonMed)
			for _, u := range res[i] {
				all[k] = append(all[k], u.cpu)
				rss[k] = append(rss[k], float64(u.rss)/1024)
				anon[k] = append(anon[k], float64(u.anon)/1024)
			}
			meds[k] = append(meds[k], s.med)
			leaders[k] = append(leaders[k], s.leader)
		}
	}
	pr("\n## Every round\n\n")
	pr("| binary | algorithm | node CPU %% median over nodes and rounds | per-round medians | leader CPU %% by round | RSS MiB median over nodes and rounds | RssAnon MiB median |\n")
	pr("|---|---|---:|---|---|---:|---:|\n")
	for _, b := range bins {
		for _, a := range algos {
			k := key{b.label, a}
			pr("| %s | %s | **%.2f** | %s | %s | **%.1f** | %.1f |\n", k.bin, k.algo, medianF(all[k]), floats(meds[k]), floats(leaders[k]), medianF(rss[k]), medianF(anon[k]))
		}
	}
	return nil
}

func floats(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, ", ")
}

// scale starts clusters of each size in turn and measures the time to the
// first agreement, the idle cost, and crash failover.
func scale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	sizesFlag := fs.String("nodes", "32,64,128", "cluster sizes (electord processes), comma-separated")
	algos := fs.String("algorithms", "bully,ring", "algorithms to measure")
	bin := fs.String("electord", "", "electord binary (default: build cmd/electord)")
	extra := fs.String("args", "", "extra electord flags, space-separated (default config when empty)")
	kills := fs.Int("kills", 5, "SIGKILLs of the leader per size and algorithm")
	window := fs.Duration("window", 20*time.Second, "idle measurement window after the first agreement")
	settle := fs.Duration("settle", 10*time.Second, "wait after the first agreement before measuring")
	firstTimeout := fs.Duration("first-timeout", 120*time.Second, "give up on the first agreement after this long")
	bootstrap := fs.Bool("bootstrap-expect", false, "start every node with --bootstrap-expect <nodes>, as a cluster formed from scratch should be (electord dev does): no node elects before it has seen them all")
	pauses := fs.Int("pauses", 0, "after the kills, SIGSTOPs of the leader (a silent leader: only the heartbeat timeout finds it), each resumed after the others agree")
	partition := fs.Duration("partition", 0, "after the kills, pause the lower half of the nodes for at most this long and measure gossip convergence after they resume (scale_partition.go); 0: skip")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	secureFlag(fs)
	fs.Parse(args)
	path, cleanup, err := electordBinary(*bin)
	if err != nil {
		return err
	}
	defer cleanup()
	pr, config, closeOut, err := report(*out, *extra)
	if err != nil {
		return err
	}
	defer closeOut()
	pr("# electbench scale\n\n`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %s/%s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadavg())
	if *bootstrap {
		config += " + `--bootstrap-expect <nodes>`"
	}
	pr("- electord `%s` (%s), %s\n", path, describe(path), config)
	pr("- first agreement: from starting the first process (node 1 first, then the others, 8 at a time, each joining node 1; ports and API clients are set up before) until every node's watch reports the same leader; idle: after it and %v more, utime+stime over %v; crash: SIGKILL of the leader until every survivor agrees on a new leader with a higher term (10 s limit), then the node is restarted and all agree again\n\n", *settle, *window)
	pr("| nodes | algorithm | start all, s | first agreement, s | leader CPU %% | node CPU %% median (max) | RSS MiB median (max) | changes in the window | crash p50 / p99 ms (kills) | crashes failed | load average after |\n")
	pr("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	var notes []string // gossip convergence, printed after the table
	defer func() {
		if len(notes) > 0 {
			pr("\nRejoin after each kill (--kills), silent leader (--pauses) and gossip convergence after a partition (--partition: a pause of the lower half):\n\n%s\n", strings.Join(notes, "\n"))
		}
	}()
	for _, ns := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ns))
		if err != nil || n < 2 {
			return fmt.Errorf("--nodes: bad size %q", ns)
		}
		for _, algo := range strings.Split(*algos, ",") {
			args := strings.Fields(*extra)
			if *bootstrap {
				args = append(args, "--bootstrap-expect", strconv.Itoa(n))
			}
			row, note, err := scaleOne(path, algo, n, args, *kills, *pauses, *settle, *window, *firstTimeout, *partition)
			if note != "" {
				notes = append(notes, fmt.Sprintf("- %d nodes, %s: %s", n, algo, note))
			}
			if err != nil {
				logf("%d nodes, %s: %v", n, algo, err)
			}
			pr("| %d | %s | %s |\n", n, algo, row)
		}
	}
	return nil
}

// scaleOne measures one cluster size and returns the table row's cells
// after the algorithm (a failure fills in what it reached).
func scaleOne(path, algo string, n int, extra []string, kills, pauses int, settle, window, firstTimeout, partition time.Duration) (row, note string, err error) {
	logf("%d nodes, %s: starting", n, algo)
	c, err := startCluster(path, algo, n, extra, logf)
	if err != nil {
		return "start failed", "", err
	}
	defer c.stop()
	t0 := c.firstStart // the clock starts with the first process
	started := c.allStarted.Sub(t0)
	_, at, err := c.waitAgreed(firstTimeout, anyLeader)
	if err != nil {
		logf("%d nodes, %s: %v", n, algo, err) // every node's view
		return fmt.Sprintf("%.1f | none within %v | | | | | | | %s", started.Seconds(), firstTimeout, loadavg()), "", errors.New("no first agreement")
	}
	first := at.Sub(t0)
	logf("%d nodes, %s: agreed after %.1f s", n, algo, first.Seconds())
	time.Sleep(settle)
	before := c.changeCounts()
	s := summarizeUsage(sample([]*cluster{c}, window)[0])
	changes := c.changesSince(before)
	if changes.nodes > 0 {
		logf("%d nodes, %s: %d nodes saw leader or term changes in the idle window (up to %d each)", n, algo, changes.nodes, changes.max)
	}
	var crash, rejoin, crashCPUs samples
	failed := 0
	for i := range kills {
		old, _, err := c.waitAgreed(60*time.Second, anyLeader)
		if err != nil {
			failed += kills - i
			break
		}
		leader := c.proc(old.Id)
		idle := c.idleCPU(leader, i+1)
		cpu0 := c.snapCPU(leader)
		stopPerf := perfRecord(cpu0, fmt.Sprintf("kill-%d", i+1))
		if stopPerf != nil {
			cpu0 = c.snapCPU(leader) // after perf attached
		}
		k0 := time.Now()
		c.kill(leader)
		d, ok := c.timeNewLeader(old, k0, fmt.Sprintf("kill %d: leader %d down", i+1, old.Id))
		var u crashCPU
		if ok {
			u = cpu0.since()
		}
		if stopPerf != nil {
			stopPerf()
		}
		if ok {
			crash = append(crash, d)
			crashCPUs = append(crashCPUs, u.nanos)
			logf("kill %d: %s; idle before it: %s", i+1, u, idle)
		} else {
			failed++
		}
		r0 := time.Now()
		if err := c.start(leader); err != nil {
			return "", "", err
		}
		if _, at, err := c.waitAgreed(60*time.Second, anyLeader); err == nil {
			rejoin = append(rejoin, at.Sub(r0))
		}
	}
	if len(rejoin) > 0 {
		note = fmt.Sprintf("rejoin (from starting the killed leader again until every node, it included, agrees) p50 / p99 %s / %s ms (%d)",
			ms(rejoin.pct(0.5)), ms(rejoin.pct(0.99)), len(rejoin))
	}
	if len(crashCPUs) > 0 {
		note = strings.TrimPrefix(fmt.Sprintf("%s; survivors' CPU from the kill to agreement p50 / max %s / %s ms (%d)",
			note, ms(crashCPUs.pct(0.5)), ms(crashCPUs.pct(1)), len(crashCPUs)), "; ")
	}
	if pauses > 0 {
		ps, pf := c.pauseLeader(pauses)
		silent := fmt.Sprintf("silent leader (SIGSTOP): %d of %d found no new leader within 10 s", pf, pauses)
		if len(ps) > 0 {
			silent = fmt.Sprintf("silent leader (SIGSTOP) p50 / p99 %s / %s ms, %d of %d failed", ms(ps.pct(0.5)), ms(ps.pct(0.99)), pf, pauses)
		}
		note = strings.TrimPrefix(note+"; "+silent, "; ")
	}
	if partition > 0 {
		if _, _, err := c.waitAgreed(60*time.Second, anyLeader); err == nil {
			g := c.pauseHeal(partition, 2*time.Minute)
			logf("%d nodes, %s: gossip: %s", n, algo, g)
			note = strings.TrimPrefix(note+"; gossip: "+g, "; ")
		}
	}
	crashCell := "–"
	if len(crash) > 0 {
		crashCell = fmt.Sprintf("%s / %s (%d)", ms(crash.pct(0.5)), ms(crash.pct(0.99)), len(crash)+failed)
	}
	return fmt.Sprintf("%.1f | %.1f | %.2f | %.2f (%.2f) | %.1f (%.1f) | %s in %v | %s | %d | %s",
		started.Seconds(), first.Seconds(), s.leader, s.med, s.hi, s.rssMed, s.rssMax, changes, window, crashCell, failed, loadavg()), note, nil
}

// timeNewLeader waits up to 10 s from t0 for every running node to agree
// on a leader other than old with a higher term, logs the outcome after
// what, and returns the time from t0 (false: no agreement).
func (c *cluster) timeNewLeader(old *pb.LeaderInfo, t0 time.Time, what string) (time.Duration, bool) {
	_, at, err := c.waitAgreed(10*time.Second, func(v *pb.LeaderInfo) bool { return v.Id != old.Id && v.Term > old.Term })
	if err != nil {
		logf("%s: %v", what, shorten(err.Error()))
		return 0, false
	}
	logf("%s, new leader after %s ms", what, ms(at.Sub(t0)))
	return at.Sub(t0), true
}

// changeCounts is every process's count of leader or term changes its
// watch reported, by id.
func (c *cluster) changeCounts() map[uint64]int {
	m := make(map[uint64]int, len(c.procs))
	for _, p := range c.procs {
		p.mu.Lock()
		m[p.id] = p.changes
		p.mu.Unlock()
	}
	return m
}

// changeSummary is what the nodes' watches reported between two counts:
// the most changes one node saw, and how many nodes saw any.
type changeSummary struct{ max, nodes int }

func (s changeSummary) String() string {
	if s.nodes == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d nodes)", s.max, s.nodes)
}

func (c *cluster) changesSince(before map[uint64]int) changeSummary {
	var s changeSummary
	for id, n := range c.changeCounts() {
		if d := n - before[id]; d > 0 {
			s.max, s.nodes = max(s.max, d), s.nodes+1
		}
	}
	return s
}

func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
