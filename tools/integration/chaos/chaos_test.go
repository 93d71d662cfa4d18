// Package chaos_test runs the short seeded chaos schedule (tools/chaos)
// against real electord processes, each in its own network namespace, for
// both algorithms with quorum off and on, and fails on every violation the
// history checker finds. It needs root and network namespaces; without
// them it skips and says why.
package chaos_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/tools/chaos"
	"github.com/electord/electord/tools/faultnet"
	"github.com/electord/electord/tools/history"
	"github.com/electord/electord/tools/internal/candidate"
	"github.com/electord/electord/tools/internal/repo"
	"github.com/electord/electord/tools/internal/testlock"
)

// needFaultnet skips without root and fails, as root, when network
// namespaces or iptables are missing, naming what to install.
func needFaultnet(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("%s skipped: it needs root (network namespaces, iptables)", what)
	}
	if err := faultnet.Available(); err != nil {
		t.Fatalf("%s: %v (as root it must run: apt-get install -y iproute2 iptables)", what, err)
	}
}

var electordBin string

// appEnv, set, makes this test binary a candidate app (candidate.Main)
// instead of the tests: the named elections' apps are this binary run again
// (see namedApp).
const appEnv = "ELECTORD_CHAOS_APP"

func TestMain(m *testing.M) {
	if os.Getenv(appEnv) == "1" {
		err := candidate.Main(os.Args[1:])
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// Take turns with the integration package: both judge real clusters'
	// timing, and two at once on two cores starve each other.
	release, err := testlock.Acquire(30 * time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer release()
	stop := faultnet.CleanupOnSignal()
	defer stop()
	defer faultnet.CloseAll()
	dir, err := os.MkdirTemp("", "electord-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin := os.Getenv("ELECTORD_CHAOS_BIN"); bin != "" {
		// Another build measured by the same tests (a "before" binary).
		if _, err := os.Stat(bin); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: ELECTORD_CHAOS_BIN: %v\n", err)
			return 1
		}
		electordBin = bin
		return m.Run()
	}
	electordBin = filepath.Join(dir, "electord")
	// Static: the Docker variant's FROM scratch image takes it too.
	if err := repo.Build(electordBin, true, "./cmd/electord"); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: building electord: %v\n", err)
		return 1
	}
	return m.Run()
}

// keepDir returns the directory for a cluster's data and logs, and the
// electord flags that go with it: with ELECTORD_CHAOS_KEEP=DIR set,
// DIR/name (kept after the test) and --log-level debug, so that a run's
// timing can be traced in the nodes' logs; else a directory removed with
// the test, and no flags.
func keepDir(t *testing.T, name string) (string, []string) {
	t.Helper()
	keep := os.Getenv("ELECTORD_CHAOS_KEEP")
	if keep == "" {
		return t.TempDir(), nil
	}
	dir := filepath.Join(keep, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("ELECTORD_CHAOS_KEEP: %v", err)
	}
	t.Logf("the nodes' data and debug logs are kept in %s", dir)
	return dir, []string{"--log-level", "debug"}
}

// seed is the schedule's seed: ELECTORD_CHAOS_SEED, or 1.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("ELECTORD_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ELECTORD_CHAOS_SEED: %v", err)
		}
		return v
	}
	return 1
}

// TestChaos runs one tour of every fault kind per configuration, about 40 s
// each, and fails on any violation. It runs in CI (as root). Without root
// it skips and says why; as root, missing tools (ip, iptables) fail it, so
// CI cannot pass by skipping.
func TestChaos(t *testing.T) {
	needFaultnet(t, "chaos schedule")
	for _, algo := range []string{"bully", "ring"} {
		for _, quorum := range []int{0, 5} {
			name := fmt.Sprintf("%s/quorum=%d", algo, quorum)
			t.Run(name, func(t *testing.T) {
				tour(t, chaos.Options{Algorithm: algo, Quorum: quorum}, 4*time.Minute)
			})
		}
	}
}

// TestChaosDocker runs one tour on Docker containers (FROM scratch, one
// user-defined network), bully with quorum 5. It runs only with
// ELECTORD_CHAOS_DOCKER=1, and needs root and a Docker engine.
func TestChaosDocker(t *testing.T) {
	if os.Getenv("ELECTORD_CHAOS_DOCKER") != "1" {
		t.Skip("Docker chaos schedule skipped: set ELECTORD_CHAOS_DOCKER=1 to run it (root, a Docker engine)")
	}
	if err := faultnet.Available(); err != nil {
		t.Skipf("Docker chaos schedule skipped: %v", err)
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("Docker chaos schedule skipped: docker info: %v", err)
	}
	tour(t, chaos.Options{Algorithm: "bully", Quorum: 5, Docker: true}, 6*time.Minute)
}

// tour runs one tour of 5 nodes with o's algorithm, quorum and place, and
// reports; limit bounds it.
func tour(t *testing.T, o chaos.Options, limit time.Duration) {
	t.Helper()
	o.Binary, o.Nodes, o.Seed, o.Dir, o.Logf = electordBin, 5, seed(t), t.TempDir(), t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	report(t, res)
}

// report logs the figures and fails the test on every violation.
func report(t *testing.T, res *chaos.Result) {
	t.Helper()
	r := res.Report
	t.Logf("%.1f s, faults %v; %d answers (%d failed requests), %d claims; %d heals: p50 %v, p99 %v, max %v, %d without agreement; %d follower-only faults, %d followed by another leader",
		res.Elapsed.Seconds(), res.Faults, r.Obs, r.Errs, r.Claims, r.Heals,
		history.Percentile(r.HealTimes, .5).Round(time.Millisecond), history.Percentile(r.HealTimes, .99).Round(time.Millisecond),
		history.Percentile(r.HealTimes, 1).Round(time.Millisecond), r.Unhealed, r.Calms, r.LeaderChanges)
	if len(r.Violations) == 0 {
		return
	}
	var lines []string
	for _, n := range res.History.Notes {
		lines = append(lines, fmt.Sprintf("%9.3fs %s", n.At.Sub(r.Start).Seconds(), n.Text))
	}
	t.Logf("fault log:\n%s", strings.Join(lines, "\n"))
	const most = 40
	for i, v := range r.Violations {
		if i == most {
			t.Errorf("... and %d more violations", len(r.Violations)-most)
			break
		}
		t.Errorf("violation %s", r.Format(v))
	}
	t.Errorf("%d violations: %v", len(r.Violations), r.Rules())
	if changes := changesNear(res, r.Violations); changes != "" {
		t.Logf("the nodes' leadership changes from 2 s before to 1 s after each violation, with their causes:\n%s", changes)
	}
}

// changesNear returns the "leadership changed" lines of the nodes' logs
// (each with the input that caused it) from 2 s before to 1 s after each
// violation, with times relative to the start, so a failure in CI says
// why a node lost or changed its leader.
func changesNear(res *chaos.Result, vs []history.Violation) string {
	return leadershipChanges(res.Dir, res.Report.Start, func(at time.Time) bool {
		for _, v := range vs {
			if !at.Before(v.At.Add(-2*time.Second)) && !at.After(v.At.Add(time.Second)) {
				return true
			}
		}
		return false
	})
}

// leadershipChanges returns the "leadership changed" lines of the logs
// node-*.log in dir whose time keep accepts, sorted, each with its node
// and its time relative to start.
func leadershipChanges(dir string, start time.Time, keep func(time.Time) bool) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "node-*.log"))
	var out []string
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		node := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "node-"), ".log")
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, `msg="leadership changed"`) || !strings.HasPrefix(line, "time=") {
				continue
			}
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil || !keep(at) {
				continue
			}
			_, rest, _ := strings.Cut(line, `msg="leadership changed" `)
			out = append(out, fmt.Sprintf("%9.3fs node %s: %s", at.Sub(start).Seconds(), node, rest))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestHarness checks the harness itself on three real nodes: a cut drops
// the packets it names and no others, the observer is never cut, process
// faults change the topology, and Close and Sweep leave nothing behind.
func TestHarness(t *testing.T) {
	needFaultnet(t, "faultnet harness test")
	var topos []faultnet.Topology
	c, err := faultnet.New(faultnet.Config{Binary: electordBin, Nodes: 3, Algorithm: "bully", Dir: t.TempDir(), Logf: t.Logf,
		OnChange: func(tp faultnet.Topology) { topos = append(topos, tp) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// dial says whether from (0: the observer) can connect to to's api port
	// within limit, retrying refusals (a node may still be starting).
	dial := func(from, to int, limit time.Duration) bool {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		addr := c.Node(to).APIAddr
		var conn net.Conn
		var err error
		for ctx.Err() == nil { // the node may still be starting: retry refusals
			if from == 0 {
				conn, err = c.DialContext(ctx, "tcp", addr)
			} else {
				conn, err = c.DialFrom(ctx, from, "tcp", addr)
			}
			if err == nil {
				conn.Close()
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	reach := func(from, to int) bool { return dial(from, to, 20*time.Second) }
	cut := func(from, to int) bool { return !dial(from, to, time.Second) }
	if !reach(1, 2) || !reach(0, 2) {
		t.Fatal("node 2 unreachable before any cut")
	}
	if err := c.Cut(1, 2); err != nil {
		t.Fatal(err)
	}
	if !cut(1, 2) {
		t.Error("node 1 reached node 2 through the cut 1 -> 2")
	}
	if !reach(3, 2) || !reach(0, 2) {
		t.Error("the cut 1 -> 2 cut node 3 or the observer off node 2")
	}
	if err := c.Partition([]int{1}, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	if !cut(3, 1) || !reach(3, 2) || !reach(0, 1) {
		t.Error("partition [1] | [2 3]: wrong links")
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if !reach(1, 2) || !reach(3, 1) {
		t.Error("links still cut after Heal")
	}
	if err := c.Pause(2); err != nil {
		t.Fatal(err)
	}
	if tp := c.Topology(); tp.Up[2] || !tp.Up[1] {
		t.Errorf("paused node 2: topology says up %v", tp.Up)
	}
	if err := c.Resume(2); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(3); err != nil {
		t.Fatal(err)
	}
	if c.State(3) != faultnet.Down {
		t.Errorf("killed node 3 is %v", c.State(3))
	}
	if err := c.Start(3); err != nil {
		t.Fatal(err)
	}
	if !reach(1, 3) {
		t.Error("restarted node 3 unreachable")
	}
	if len(topos) < 8 {
		t.Errorf("%d topology changes reported, want at least 8", len(topos))
	}
	var names []string
	for _, nd := range c.Nodes {
		names = append(names, nd.NS)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range names {
		if strings.Contains(string(out), ns) {
			t.Errorf("namespace %s left after Close", ns)
		}
	}

	// A namespace left by a run whose process is gone is swept.
	stale := faultnet.Prefix + "2147483647-1-hub"
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	faultnet.Sweep(t.Logf)
	if _, err := os.Stat("/run/netns/" + stale); err == nil {
		exec.Command("ip", "netns", "del", stale).Run()
		t.Error("Sweep left a stale namespace")
	}
}
