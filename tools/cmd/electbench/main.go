// Command electbench measures electord with real processes on loopback.
//
//	electbench failover  [--nodes 5] [--kills 30] [--algorithms bully,ring]
//	                     [--electord [label=]path,...] [--rounds 1] [--out file]
//	electbench stability [--duration 10m] [--hogs 2]
//	electbench rolling   [--terms 20] [--rolls 3] (graceful stops: rolling.go)
//	electbench chaos     [--duration 10m] [--seed S] [--algorithm bully,ring] [--quorum 0,5] [--named 3]  (root; see chaos.go, docs/CHAOS.md)
//	electbench apps      [--kills 20] [--elections 1] [--kill app|node]  (candidate apps in named elections: apps.go)
//	electbench shards    [--elections 1000] [--placement spread] [--streams per-election]  (N elections × 5 nodes: start, idle, crash, return; shards.go)
//	electbench probe     [--kills 20] [--periods 1s,100ms]  (--candidate-probe: the leader's health app killed; probe.go)
//
// failover starts the electord processes with the default configuration,
// SIGKILLs the leader again and again, and for each kill measures the time
// until every survivor's watch reports the same new leader with a higher
// term; then the same for a graceful resign and for a transfer. stability
// counts leader changes on a healthy cluster while CPU hogs saturate every
// core. electord is built from this module unless --electord names a binary.
//
// Side by side: failover --electord before=/tmp/before/electord,after=build
// --rounds 3 measures each binary in turn, round after round (before, after,
// before, after, ...), prints each run's table as it ends, then per binary
// the p50 and p99 of every round with their median and spread across rounds,
// and every binary against the first. The spread between rounds of one
// binary is the noise a difference between binaries must exceed.
//
// Ports come from 20000–29999, outside the kernel's ephemeral range, and are
// never reused within one electbench process (see freePort).
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"github.com/electord/electord/tools/internal/repo"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "failover":
		err = failover(os.Args[2:])
	case "stability":
		err = stability(os.Args[2:])
	case "rolling":
		err = rolling(os.Args[2:])
	case "idle":
		err = idle(os.Args[2:])
	case "scale":
		err = scale(os.Args[2:])
	case "chaos": // chaos.go
		err = chaosCmd(os.Args[2:])
	case "crash": // crashnet.go
		err = crashNet(os.Args[2:])
	case "apps": // apps.go
		err = appsCmd(os.Args[2:])
	case "app": // app.go: one candidate app, started by apps
		err = appMain(os.Args[2:])
	case "shards": // shards.go
		err = shardsCmd(os.Args[2:])
	case "probe": // probe.go
		err = probeCmd(os.Args[2:])
	case "healthapp": // probe.go: one health app, started by probe
		err = healthAppMain(os.Args[2:])
	case "hog":
		hog()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "electbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: electbench failover|stability|rolling|idle|scale|chaos|crash|apps|shards|probe [flags]  (-h for flags)")
	os.Exit(2)
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

// electordBinary builds cmd/electord unless path is given. The build is
// static, as the released image's binary is: a cgo build maps libc and the
// dynamic loader too (about 1.5 MiB of RSS), which no shipped node pays.
func electordBinary(path string) (string, func(), error) {
	if path != "" {
		return path, func() {}, nil
	}
	return buildElectord("electbench-bin-", true)
}

// buildElectord builds cmd/electord of this repository into a new temporary
// directory (static: with CGO_ENABLED=0, for a FROM scratch image); done
// removes it.
func buildElectord(prefix string, static bool) (bin string, done func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "electord")
	if err := repo.Build(bin, static, "./cmd/electord"); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building electord: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

type samples []time.Duration

func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(p*float64(len(c)) + 0.5)
	return c[min(max(i-1, 0), len(c)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// common are the flags both measurements take.
type common struct {
	nodes        *int
	algos, extra *string
	bin          *string
}

func commonFlags(fs *flag.FlagSet) common {
	secureFlag(fs)
	return common{
		nodes: fs.Int("nodes", 5, "electord processes"),
		algos: fs.String("algorithms", "bully,ring", "algorithms to measure"),
		bin:   fs.String("electord", "", "electord binary (default: build cmd/electord); failover takes a list, [label=]path,..., to measure binaries side by side (\"build\" = build cmd/electord)"),
		extra: fs.String("args", "", "extra electord flags, space-separated (default config when empty)"),
	}
}

// sideBySide is what a command that measures binaries side by side opens:
// the binaries, the report's writer and config line, and the algorithms.
type sideBySide struct {
	bins   []binary
	pr     func(string, ...any)
	config string
	algos  []string
	close  func()
}

// open finds (or builds) the binaries and opens the report (stdout, and out
// when set); call close when done.
func (c common) open(out string) (*sideBySide, error) {
	bins, cleanup, err := binaries(*c.bin)
	if err != nil {
		return nil, err
	}
	pr, config, closeOut, err := report(out, *c.extra)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &sideBySide{bins: bins, pr: pr, config: config, algos: strings.Split(*c.algos, ","),
		close: func() { closeOut(); cleanup() }}, nil
}

// setup parses args and finds (or builds) electord; call cleanup when done.
func setup(fs *flag.FlagSet, args []string, c common) (path string, cleanup func(), err error) {
	fs.Parse(args)
	return electordBinary(*c.bin)
}

// binary is one electord build under test, with the label its tables use.
type binary struct{ label, path string }

// binaries parses --electord: a comma-separated list of [label=]path, where
// the path "build" (or an empty list) means cmd/electord built from this
// module. Unlabelled entries are called A, B, C, ... by position.
func binaries(spec string) ([]binary, func(), error) {
	if spec == "" {
		spec = "build"
	}
	var bins []binary
	var built string
	cleanup := func() {}
	for i, e := range strings.Split(spec, ",") {
		b := binary{label: string(rune('A' + i)), path: e}
		if l, p, ok := strings.Cut(e, "="); ok {
			b.label, b.path = l, p
		}
		if b.path == "build" || b.path == "" {
			if built == "" {
				var err error
				if built, cleanup, err = electordBinary(""); err != nil {
					return nil, nil, err
				}
			}
			b.path = built
		} else if _, err := os.Stat(b.path); err != nil {
			cleanup()
			return nil, nil, err
		}
		for _, o := range bins {
			if o.label == b.label {
				cleanup()
				return nil, nil, fmt.Errorf("--electord: label %q used twice", b.label)
			}
		}
		bins = append(bins, b)
	}
	return bins, cleanup, nil
}

// describe names a binary file by a prefix of its SHA-256 and its size.
func describe(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("sha256 %x, %d bytes", h.Sum(nil)[:6], n)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

var events = []string{"crash (SIGKILL)", "resign", "transfer"}

// failoverRun is one failover measurement: one binary, every algorithm.
type failoverRun struct {
	round int
	bin   binary
	res   map[string]map[string]*result // algorithm, event
}

func failover(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ExitOnError)
	cf := commonFlags(fs)
	kills := fs.Int("kills", 30, "SIGKILLs of the leader per algorithm (also the number of resigns and transfers)")
	rounds := fs.Int("rounds", 1, "measure every binary this many times, alternating binaries round by round (A, B, A, B, ...)")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	fs.Parse(args)
	sb, err := cf.open(*out)
	if err != nil {
		return err
	}
	defer sb.close()
	bins, pr, config, algos := sb.bins, sb.pr, sb.config, sb.algos

	side := len(bins) > 1 || *rounds > 1
	if side {
		pr("# electbench failover: %d binaries × %d rounds, alternating\n\n", len(bins), *rounds)
		pr("`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
		pr("- %s, %s/%s, %d CPUs, GOMAXPROCS=%d, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
		pr("- %d electord processes, %s; %d kills, %d resigns, %d transfers per algorithm per run\n", *cf.nodes, config, *kills, *kills, *kills)
		for _, b := range bins {
			pr("- %s = `%s` (%s)\n", b.label, b.path, describe(b.path))
		}
		var order []string
		for _, b := range bins {
			order = append(order, b.label)
		}
		pr("- order: %s in every round\n", strings.Join(order, ", "))
	}
	var runs []failoverRun
	for r := 1; r <= *rounds; r++ {
		for _, b := range bins {
			run := failoverRun{round: r, bin: b, res: map[string]map[string]*result{}}
			t0 := time.Now()
			for _, algo := range algos {
				logf("round %d, %s, %s", r, b.label, algo)
				c, err := startCluster(b.path, algo, *cf.nodes, strings.Fields(*cf.extra), logf)
				if err != nil {
					return err
				}
				res, err := measure(c, *kills)
				c.stop()
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", r, b.label, algo, err)
				}
				run.res[algo] = res
			}
			runs = append(runs, run)
			if side {
				pr("\n## Round %d, %s (%.0f s, load average after %s)\n\n", r, b.label, time.Since(t0).Seconds(), loadavg())
			} else {
				pr("\nfailover with %d electord processes, %s, %s/%s, GOMAXPROCS=%d\n\n", *cf.nodes, config, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
			}
			pr("| algorithm | event | runs | p50 ms | p99 ms | max ms | failed |\n")
			pr("|---|---|---:|---:|---:|---:|---:|\n")
			for _, algo := range algos {
				for _, ev := range events {
					x := run.res[algo][ev]
					pr("| %s | %s | %d | %s | %s | %s | %d |\n", algo, ev, len(x.s), ms(x.s.pct(0.5)), ms(x.s.pct(0.99)), ms(x.s.pct(1)), x.failed)
				}
			}
		}
	}
	if side {
		summarize(pr, bins, algos, runs)
	}
	return nil
}

// summarize prints, per binary, each event's p50 and p99 round by round with
// their median across rounds and the pooled figures, then (with two or more
// binaries) every binary against the first.
func summarize(pr func(string, ...any), bins []binary, algos []string, runs []failoverRun) {
	type stat struct {
		p50, p99 []time.Duration // one per round
		all      samples
		failed   int
	}
	stats := map[string]*stat{} // label/algo/event
	key := func(l, a, e string) string { return l + "/" + a + "/" + e }
	for _, r := range runs {
		for _, a := range algos {
			for _, e := range events {
				k := key(r.bin.label, a, e)
				if stats[k] == nil {
					stats[k] = &stat{}
				}
				x, st := r.res[a][e], stats[k]
				st.p50 = append(st.p50, x.s.pct(0.5))
				st.p99 = append(st.p99, x.s.pct(0.99))
				st.all = append(st.all, x.s...)
				st.failed += x.failed
			}
		}
	}
	list := func(ds []time.Duration) string {
		var s []string
		for _, d := range ds {
			s = append(s, ms(d))
		}
		return strings.Join(s, ", ")
	}
	spread := func(ds []time.Duration) string {
		return ms(slices.Max(ds) - slices.Min(ds))
	}
	for _, b := range bins {
		pr("\n## %s: every round (medians across rounds; spread = max − min of the rounds)\n\n", b.label)
		pr("| algorithm | event | samples | p50 ms by round | p50 median | p50 spread | p99 ms by round | p99 median | p99 spread | all samples p50 / p99 | max ms | failed |\n")
		pr("|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
		for _, a := range algos {
			for _, e := range events {
				st := stats[key(b.label, a, e)]
				pr("| %s | %s | %d | %s | **%s** | %s | %s | **%s** | %s | %s / %s | %s | %d |\n", a, e, len(st.all),
					list(st.p50), ms(median(st.p50)), spread(st.p50),
					list(st.p99), ms(median(st.p99)), spread(st.p99),
					ms(st.all.pct(0.5)), ms(st.all.pct(0.99)), ms(st.all.pct(1)), st.failed)
			}
		}
	}
	if len(bins) < 2 {
		return
	}
	base := bins[0]
	for _, b := range bins[1:] {
		pr("\n## %s against %s (medians across rounds)\n\n", b.label, base.label)
		pr("A difference is beyond noise only if it is larger than the spread of both binaries' own rounds; the ranges column says whether the round-by-round ranges of the two overlap.\n\n")
		pr("| algorithm | event | p50 %[1]s | p50 %[2]s | %[2]s − %[1]s | p50 ranges | p99 %[1]s | p99 %[2]s | %[2]s − %[1]s | p99 ranges |\n", base.label, b.label)
		pr("|---|---|---:|---:|---:|---|---:|---:|---:|---|\n")
		for _, a := range algos {
			for _, e := range events {
				x, y := stats[key(base.label, a, e)], stats[key(b.label, a, e)]
				pr("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", a, e,
					ms(median(x.p50)), ms(median(y.p50)), signed(median(y.p50)-median(x.p50)), overlap(x.p50, y.p50, b.label),
					ms(median(x.p99)), ms(median(y.p99)), signed(median(y.p99)-median(x.p99)), overlap(x.p99, y.p99, b.label))
			}
		}
	}
}

func median(ds []time.Duration) time.Duration {
	c := slices.Clone(ds)
	slices.Sort(c)
	n := len(c)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func signed(d time.Duration) string {
	switch r := ms(d.Abs()); {
	case r == "0.0":
		return r
	case d > 0:
		return "+" + r
	default:
		return "−" + r
	}
}

// overlap says whether the round-by-round ranges of binaries a and b
// overlap, and if not whether b's lies below or above a's.
func overlap(a, b []time.Duration, lb string) string {
	switch {
	case slices.Max(b) < slices.Min(a):
		return "apart: " + lb + " lower"
	case slices.Min(b) > slices.Max(a):
		return "apart: " + lb + " higher"
	}
	return "overlap"
}

type result struct {
	s      samples
	failed int
}

func measure(c *cluster, runs int) (map[string]*result, error) {
	res := map[string]*result{"crash (SIGKILL)": {}, "resign": {}, "transfer": {}}
	if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
		return nil, fmt.Errorf("first election: %w", err)
	}
	for i := range runs {
		old, _, err := c.waitAgreed(30*time.Second, anyLeader)
		if err != nil {
			return nil, err
		}
		leader := c.proc(old.Id)
		t0 := time.Now()
		c.kill(leader)
		_, at, err := c.waitAgreed(10*time.Second, func(v *pb.LeaderInfo) bool { return v.Id != old.Id && v.Term > old.Term })
		if err != nil {
			res["crash (SIGKILL)"].failed++
			logf("kill %d: %v", i+1, err)
		} else {
			res["crash (SIGKILL)"].s = append(res["crash (SIGKILL)"].s, at.Sub(t0))
			logf("kill %d: leader %d down, new leader after %s ms", i+1, old.Id, ms(at.Sub(t0)))
		}
		if err := c.start(leader); err != nil {
			return nil, err
		}
		if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
			return nil, fmt.Errorf("after restarting node %d: %w", leader.id, err)
		}
	}
	for i := range runs {
		for _, op := range []string{"resign", "transfer"} {
			old, _, err := c.waitAgreed(30*time.Second, anyLeader)
			if err != nil {
				return nil, err
			}
			leader := c.proc(old.Id)
			var target uint64
			for target == 0 || target == old.Id {
				target = uint64(1 + rand.IntN(len(c.procs)))
			}
			ok := func(v *pb.LeaderInfo) bool { return v.Id != old.Id && v.Term > old.Term }
			if op == "transfer" {
				ok = func(v *pb.LeaderInfo) bool { return v.Id == target && v.Term > old.Term }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t0 := time.Now()
			if op == "resign" {
				_, err = leader.client.Resign(ctx, &pb.ResignRequest{})
			} else {
				_, err = leader.client.Transfer(ctx, &pb.TransferRequest{Id: target})
			}
			cancel()
			if err == nil {
				var at time.Time
				if _, at, err = c.waitAgreed(10*time.Second, ok); err == nil {
					res[op].s = append(res[op].s, at.Sub(t0))
					logf("%s %d: %s ms", op, i+1, ms(at.Sub(t0)))
					continue
				}
			}
			res[op].failed++
			logf("%s %d: %v", op, i+1, err)
		}
	}
	return res, nil
}

func stability(args []string) error {
	fs := flag.NewFlagSet("stability", flag.ExitOnError)
	cf := commonFlags(fs)
	duration := fs.Duration("duration", 10*time.Minute, "how long to watch")
	hogs := fs.Int("hogs", runtime.NumCPU(), "CPU hog processes (each spins one core)")
	path, cleanup, err := setup(fs, args, cf)
	if err != nil {
		return err
	}
	defer cleanup()
	nodes, algos, extra := cf.nodes, cf.algos, cf.extra
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Println("| algorithm | duration | CPU hogs | spurious leader changes (sum over nodes' watches) |")
	fmt.Println("|---|---|---:|---:|")
	for _, algo := range strings.Split(*algos, ",") {
		c, err := startCluster(path, algo, *nodes, strings.Fields(*extra), logf)
		if err != nil {
			return err
		}
		if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
			c.stop()
			return err
		}
		for _, p := range c.procs {
			p.mu.Lock()
			p.changes = 0
			p.mu.Unlock()
		}
		var hogProcs []*exec.Cmd
		for range *hogs {
			h := exec.Command(self, "hog")
			if err := h.Start(); err != nil {
				return err
			}
			hogProcs = append(hogProcs, h)
		}
		time.Sleep(*duration) // the measurement window itself
		for _, h := range hogProcs {
			h.Process.Signal(syscall.SIGKILL)
			h.Wait()
		}
		changes := 0
		for _, p := range c.procs {
			p.mu.Lock()
			changes += p.changes
			p.mu.Unlock()
		}
		c.stop()
		fmt.Printf("| %s | %v | %d | %d |\n", algo, *duration, *hogs, changes)
	}
	return nil
}

// hog spins one core until killed.
func hog() {
	runtime.GOMAXPROCS(1)
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(errors.New("unreachable"))
		}
	}
}
