// Command vsetcd runs electord and etcd's election side by side on this
// machine and measures their failover (see tools/README.md):
//
//	go -C tools run ./cmd/vsetcd [--candidates 5] [--events 25] [--out file]
//	go -C tools run ./cmd/vsetcd apps [--kills 20] [--algorithms bully,ring] [--systems electord,etcd]
//	go -C tools run ./cmd/vsetcd shards [--elections 10000] [--ttl 2]  (many elections per session: shards.go)
//
// In one run it starts an etcd cluster (--etcd-members, one by default) with
// --candidates etcdcandidate processes (go.etcd.io/etcd/client/v3/concurrency, at the
// smallest lease TTL the server grants) and a cluster of as many electord
// processes (built from a clean export of --rev of the repository). Both run
// for the whole measurement. Then, --events times, it SIGKILLs the leader of
// each system and SIGTERMs the leader of each (the order of the systems
// alternates), and for every event measures the time from the signal until
// every surviving candidate reports the same new leader, and until the new
// leader itself knows that it leads. The killed process is restarted and the
// system must agree again, unchanged for --settle, before the next event.
//
// apps (apps.go) measures the candidate application's crash instead: electord
// through `electbench apps` (candidate apps campaigning in a named election
// through five nodes), then etcd with as many members as candidates, each
// candidate through its own member, an Election.Observe observer through
// another; the leading app is SIGKILLed --kills times per system.
//
// It prints a Markdown report: p50/p90/p99/max per system, event kind and
// measure, then every sample. Everything it starts runs in a process group
// of its own with SIGKILL as parent-death signal, is killed on exit, on
// SIGINT/SIGTERM and after --timeout, and its temporary directory is removed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05.000 ")+format+"\n", a...)
}

// cleanup kills every child and removes the temporary directory, once.
var cleanup struct {
	sync.Once
	dir string
}

// shuttingDown is set once the harness kills everything; exits are expected.
var shuttingDown atomic.Bool

func cleanUp() {
	cleanup.Do(func() {
		shuttingDown.Store(true)
		killAll()
		if cleanup.dir != "" {
			os.RemoveAll(cleanup.dir)
		}
	})
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "shards" || os.Args[1] == "shardcand") {
		mainShards() // shards.go
		return
	}
	mode, args := "failover", os.Args[1:]
	if len(args) > 0 && args[0] == "apps" {
		mode, args = "apps", args[1:]
	}
	fs := flag.NewFlagSet("vsetcd "+mode, flag.ExitOnError)
	candidates := fs.Int("candidates", 5, "candidates per system: etcdcandidate processes and electord nodes")
	repo := fs.String("repo", "..", "the electord repository (its root)")
	rev := fs.String("rev", "HEAD", "the electord commit to build (a clean `git archive` of it, not the work tree)")
	electordBin := fs.String("electord", "", "an electord binary to use instead of building --rev")
	etcdBin := fs.String("etcd", "etcd", "the etcd server binary (Debian: apt-get install etcd-server)")
	etcdMembers := fs.Int("etcd-members", 0, "etcd cluster members (0: one for failover, --candidates for apps)")
	etcdArgs := fs.String("etcd-args", "", "extra etcd server flags, space-separated (default timings when empty)")
	ttl := fs.Int64("ttl", 0, "etcd session TTL in seconds (0: the smallest the server grants)")
	settle := fs.Duration("settle", 300*time.Millisecond, "how long a system must agree, unchanged, before the next event")
	agreeTimeout := fs.Duration("agree-timeout", 15*time.Second, "how long an event may take before it counts as failed")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up (and kill everything) after this long")
	extra := fs.String("electord-args", "", "extra electord flags, space-separated (default configuration when empty)")
	out := fs.String("out", "", "also write the report to this file")
	keep := fs.Bool("keep", false, "keep the temporary directory (logs) and print its path")
	var events, kills *int
	var algos, systems *string
	if mode == "apps" {
		kills = fs.Int("kills", 20, "SIGKILLs of the leading candidate app per electord algorithm and for etcd")
		algos = fs.String("algorithms", "bully,ring", "electord algorithms to measure")
		systems = fs.String("systems", "electord,etcd", "systems to measure")
	} else {
		events = fs.Int("events", 25, "events of each kind (SIGKILL, SIGTERM) per system")
	}
	fs.Parse(args)
	c := config{
		mode: mode, candidates: *candidates, repo: *repo, rev: *rev, electordBin: *electordBin,
		etcdBin: *etcdBin, etcdMembers: *etcdMembers, etcdArgs: strings.Fields(*etcdArgs), ttl: *ttl,
		settle: *settle, agreeTimeout: *agreeTimeout, extra: strings.Fields(*extra), out: *out, keep: *keep,
	}
	if mode == "apps" {
		c.kills, c.algos, c.systems = *kills, *algos, strings.Split(*systems, ",")
		if c.etcdMembers == 0 {
			c.etcdMembers = c.candidates
		}
	} else {
		c.events = *events
		if c.etcdMembers == 0 {
			c.etcdMembers = 1
		}
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		logf("%v: killing everything", s)
		cleanUp()
		os.Exit(130)
	}()
	time.AfterFunc(*timeout, func() {
		logf("--timeout %v reached: killing everything", *timeout)
		cleanUp()
		os.Exit(3)
	})
	err := run(c)
	if *keep {
		cleanup.dir = ""
	}
	cleanUp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsetcd:", err)
		os.Exit(1)
	}
}

type config struct {
	mode                   string // failover or apps
	candidates, events     int
	kills                  int    // apps
	algos                  string // apps: electord's, comma-separated
	systems                []string
	repo, rev, electordBin string
	etcdBin                string
	etcdMembers            int
	etcdArgs               []string
	ttl                    int64
	settle, agreeTimeout   time.Duration
	extra                  []string
	out                    string
	keep                   bool
}

func run(c config) error {
	dir, err := os.MkdirTemp("", "vsetcd-")
	if err != nil {
		return err
	}
	cleanup.dir = dir
	if c.keep {
		logf("temporary directory (kept): %s", dir)
	}
	etcdPath, err := exec.LookPath(c.etcdBin)
	if err != nil {
		return fmt.Errorf("etcd server not found (Debian: apt-get install etcd-server): %w", err)
	}
	var commit, bin string
	if c.mode != "apps" || slices.Contains(c.systems, "electord") {
		if commit, bin, err = buildElectord(c, dir); err != nil {
			return err
		}
	}
	candBin := filepath.Join(dir, "etcdcandidate")
	if err := goBuild(".", candBin, "./cmd/etcdcandidate"); err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	if c.out != "" {
		f, err := os.Create(c.out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	pr := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if c.mode == "apps" {
		return runApps(c, dir, commit, bin, etcdPath, candBin, pr)
	}

	for _, d := range []string{"electord", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	ed, err := startElectord(bin, filepath.Join(dir, "electord"), c.candidates, c.extra)
	if err != nil {
		return err
	}
	defer ed.stop()
	et, err := startEtcd(etcdPath, candBin, filepath.Join(dir, "etcd"), c.candidates, c.etcdMembers, c.ttl, c.etcdArgs)
	if err != nil {
		return err
	}
	defer et.stop()
	if _, err := ed.sys.waitStable(60*time.Second, c.settle); err != nil {
		return fmt.Errorf("first election: %w", err)
	}
	ed.seedAll()
	if _, err := et.sys.waitStable(60*time.Second, c.settle); err != nil {
		return fmt.Errorf("first election: %w", err)
	}

	start := time.Now()
	load0 := loadavg()
	var all []sample
	systems := []*system{ed.sys, et.sys}
	for i := range c.events {
		order := systems
		if i%2 == 1 {
			order = []*system{et.sys, ed.sys}
		}
		for _, kind := range []string{crash, graceful} {
			for _, s := range order {
				smp, err := s.event(kind, i+1, c.settle, c.agreeTimeout)
				if err != nil {
					return fmt.Errorf("%s %s %d: %w", s.name, kind, i+1, err)
				}
				if smp.failed != "" {
					logf("%s %s %d: FAILED: %s", s.name, kind, i+1, smp.failed)
				} else {
					logf("%s %s %d: leader %s → %s, every survivor knows after %s ms, the new leader after %s ms", s.name, kind, i+1, smp.old, smp.new, ms(smp.known), ms(smp.selfDur))
				}
				all = append(all, smp)
			}
		}
	}
	// Wait until both are whole again, so that the last restart is checked too.
	for _, s := range systems {
		if _, err := s.waitStable(60*time.Second, c.settle); err != nil {
			return err
		}
	}
	took := time.Since(start)

	pr("# electord vs etcd election: failover side by side\n\n")
	pr("`go -C tools run ./cmd/vsetcd %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %s/%s, %d CPUs, load average %s at the start of the events and %s at the end; the events took %.0f s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), load0, loadavg(), took.Seconds())
	pr("- electord: commit %s; %s\n", commit, ed.sys.note)
	pr("- etcd: `%s` (%s); %s; the server grants at least %d s (asked for 1 s); the candidates' sessions were granted %s s\n",
		etcdPath, etcdVersion(etcdPath), et.sys.note, et.minTTL, et.grantedTTLs())
	pr("- %d events of each kind per system, alternating: per round electord then etcd, then etcd then electord, SIGKILL before SIGTERM; after each event the stopped process restarts and the system must agree for %v before the next\n",
		c.events, c.settle)
	pr("- processes that exited without being signalled: electord %d, etcd %d\n\n", ed.sys.unexpectedExits(), et.sys.unexpectedExits())
	report(pr, systems, all)
	return nil
}

// buildElectord builds cmd/electord from a clean export of c.rev (unless
// c.electordBin names a binary) and says which commit it measures.
func buildElectord(c config, dir string) (commit, bin string, err error) {
	if c.electordBin != "" {
		return "(a given binary: " + c.electordBin + ")", c.electordBin, nil
	}
	b, err := exec.Command("git", "-C", c.repo, "rev-parse", c.rev).Output()
	if err != nil {
		return "", "", fmt.Errorf("git rev-parse %s in %s: %w", c.rev, c.repo, err)
	}
	commit = strings.TrimSpace(string(b))
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", c.repo, commit, src)
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return "", "", fmt.Errorf("exporting %s: %w", commit, err)
	}
	bin = filepath.Join(dir, "electord-bin")
	if err := goBuild(src, bin, "./cmd/electord"); err != nil {
		return "", "", err
	}
	return commit, bin, nil
}

func goBuild(dir, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w", pkg, dir, err)
	}
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
