package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/client"
	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	"github.com/electord/electord/tools/internal/repo"
	"github.com/electord/electord/tools/internal/testlock"
)

// The binaries TestMain builds.
var electordBin, electctlBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(appEnv); spec != "" {
		os.Exit(runApp(spec)) // this process is an app of named_test.go
	}
	if addr := os.Getenv(healthAppEnv); addr != "" {
		os.Exit(runHealthApp(addr)) // a health app of candidateprobe_test.go
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// Take turns with integration/chaos: both judge real clusters' timing,
	// and two at once on two cores starve each other.
	release, err := testlock.Acquire(30 * time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer release()
	dir, err := os.MkdirTemp("", "electord-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := repo.Build(dir+string(filepath.Separator), false, "./cmd/electord", "./cmd/electctl"); err != nil {
		fmt.Fprintln(os.Stderr, "integration: building the binaries:", err)
		return 1
	}
	// Tests run electord as an unprivileged user too (disk faults).
	_ = os.Chmod(dir, 0o755)
	electordBin = filepath.Join(dir, "electord")
	electctlBin = filepath.Join(dir, "electctl")
	return m.Run()
}

var (
	algorithms  = []string{"bully", "ring"}
	peerServers = []string{"grpc", "lf"}
)

// forEachAlgorithm runs f as a parallel subtest per algorithm, and in it
// once per inbound peer server (TestX/bully/lf: the nodes serve peers with the
// Leader/Followers pool). Clusters use free ports (in-process: :0;
// processes: freePort), so they cannot clash.
func forEachAlgorithm(t *testing.T, f func(t *testing.T, alg string)) {
	t.Helper()
	for _, alg := range algorithms {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			// The peer servers run one after the other: two clusters at a
			// time are what the timings were tuned for under -race.
			for _, ps := range peerServers {
				t.Run(ps, func(t *testing.T) { f(t, alg) })
			}
		})
	}
}

// peerServerOf returns the peer server forEachAlgorithm chose for t (the
// default outside it).
func peerServerOf(t testing.TB) string {
	for _, part := range strings.Split(t.Name(), "/") {
		if slices.Contains(peerServers, part) {
			return part
		}
	}
	return config.DefaultPeerServer
}

// ---- waiting ----

const pollInterval = 10 * time.Millisecond

// eventually polls cond every pollInterval until it holds, and fails the
// test if it does not within timeout. cond describes the state it saw; the
// last description is in the failure message.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := waitFor(timeout, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor is eventually without a test: it returns an error naming the
// last state seen when cond does not hold within timeout.
func waitFor(timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	start := time.Now()
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v (waited %v); last state: %s", timeout, time.Since(start).Round(time.Millisecond), state)
		}
		time.Sleep(pollInterval)
	}
}

// ---- in-process clusters ----

// testLogLevel is the nodes' log level: ELECTORD_TEST_LOG, or quiet.
func testLogLevel() string {
	if l := os.Getenv("ELECTORD_TEST_LOG"); l != "" {
		return l
	}
	return quiet
}

// quiet is a slog level above every record: memberlist logs an ERROR for
// each packet it sends between closing its socket and stopping its timers
// on shutdown, which would bury the test output. The assertions do not
// depend on logs; set ELECTORD_TEST_LOG to see them.
const quiet = "ERROR+8"

// configLevel is a log level config.Validate accepts for level.
func configLevel(level string) string {
	if level == quiet {
		return "error"
	}
	return level
}

// startCluster starts an in-process cluster on free loopback ports and stops
// it when the test ends.
func startCluster(t *testing.T, opts devcluster.Options) *devcluster.Cluster {
	t.Helper()
	opts.BasePort = 0
	if opts.PeerServer == "" {
		opts.PeerServer = peerServerOf(t)
	}
	if opts.LogLevel == "" {
		opts.LogLevel = testLogLevel()
	}
	// StartDev's logger takes opts.LogLevel as a slog level; each node's
	// config must hold one that config.Validate accepts.
	tune := opts.Tune
	opts.Tune = func(cfg *config.Config) {
		cfg.LogLevel = configLevel(opts.LogLevel)
		if tune != nil {
			tune(cfg)
		}
	}
	var out *lockedBuffer
	if opts.Out == nil {
		out = &lockedBuffer{}
		opts.Out = out
	}
	c, err := devcluster.Start(opts)
	if err != nil {
		t.Fatalf("StartDev(%d nodes, %s): %v", opts.Nodes, opts.Algorithm, err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() && out != nil {
			t.Logf("cluster log (%s, %d nodes):\n%s", opts.Algorithm, opts.Nodes, out.String())
		}
	})
	return c
}

// lockedBuffer is an io.Writer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// nodeByID returns the daemon of node id.
func nodeByID(t testing.TB, c *devcluster.Cluster, id election.NodeID) *daemon.Daemon {
	t.Helper()
	for _, d := range c.Nodes {
		if election.NodeID(d.Config.ID) == id {
			return d
		}
	}
	t.Fatalf("no node %d in the cluster", id)
	return nil
}

// describeViews is "1:5@3.5/follower 2:..." for the nodes' Leader().
func describeViews(ds []*daemon.Daemon) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte(' ')
		}
		li := d.Node.Leader()
		fmt.Fprintf(&b, "%d:%d@%v/%s", d.Config.ID, li.ID, li.Term, li.State)
		if d.Node.Status().Killed {
			b.WriteString("(killed)")
		}
	}
	return b.String()
}

// agreement reports whether every node of ds sees the same leader in the
// same term, and the leader (when among ds) sees itself as leader.
func agreement(ds []*daemon.Daemon) (node.LeaderInfo, bool) {
	if len(ds) == 0 {
		return node.LeaderInfo{}, false
	}
	first := ds[0].Node.Leader()
	if !first.HasLeader() {
		return first, false
	}
	for _, d := range ds {
		li := d.Node.Leader()
		if li.ID != first.ID || li.Term != first.Term {
			return first, false
		}
		if election.NodeID(d.Config.ID) == li.ID && (!li.Self || li.State != node.StateLeader) {
			return first, false
		}
		if election.NodeID(d.Config.ID) != li.ID && li.State != node.StateFollower {
			return first, false
		}
	}
	return first, true
}

// settle is how long an agreement must hold before the wait helpers
// return it: two heartbeat intervals. A bully campaign message that
// crossed the winner's announcement makes the winner announce itself
// again, in a new term, a few milliseconds after everyone first agreed;
// a test that compares terms against the agreement it waited for must see
// that second one.
const settle = 2 * config.DefaultHeartbeatInterval

// settled wraps an agreement condition: it holds once cond has held with
// the same leader and term for settle.
func settled(ds []*daemon.Daemon, li *node.LeaderInfo, cond func(node.LeaderInfo, bool) bool) func() (bool, string) {
	var since time.Time
	var held node.LeaderInfo
	return func() (bool, string) {
		got, ok := agreement(ds)
		if !cond(got, ok) {
			since = time.Time{}
			return false, describeViews(ds)
		}
		if since.IsZero() || got.ID != held.ID || got.Term != held.Term {
			since, held = time.Now(), got
		}
		*li = got
		return time.Since(since) >= settle, describeViews(ds)
	}
}

// waitNewAgreement waits until ds agree on a leader other than old's, in
// a higher term, and the agreement has settled: their agreement on old
// itself (before they noticed it gone) does not count.
func waitNewAgreement(t testing.TB, ds []*daemon.Daemon, old node.LeaderInfo, timeout time.Duration, what string) node.LeaderInfo {
	t.Helper()
	var li node.LeaderInfo
	eventually(t, timeout, what, settled(ds, &li, func(got node.LeaderInfo, ok bool) bool {
		return ok && got.ID != old.ID && got.Term > old.Term
	}))
	return li
}

// waitAgreement waits until every node of ds agrees on one leader, and the
// agreement has settled, and returns it.
func waitAgreement(t testing.TB, ds []*daemon.Daemon, timeout time.Duration, what string) node.LeaderInfo {
	t.Helper()
	var li node.LeaderInfo
	eventually(t, timeout, what, settled(ds, &li, func(_ node.LeaderInfo, ok bool) bool { return ok }))
	return li
}

// without returns ds minus the nodes with the given ids.
func without(ds []*daemon.Daemon, ids ...election.NodeID) []*daemon.Daemon {
	var out []*daemon.Daemon
next:
	for _, d := range ds {
		for _, id := range ids {
			if election.NodeID(d.Config.ID) == id {
				continue next
			}
		}
		out = append(out, d)
	}
	return out
}

// only returns the nodes of ds with the given ids.
func only(ds []*daemon.Daemon, ids ...election.NodeID) []*daemon.Daemon {
	var out []*daemon.Daemon
	for _, d := range ds {
		for _, id := range ids {
			if election.NodeID(d.Config.ID) == id {
				out = append(out, d)
			}
		}
	}
	return out
}

func apiAddrs(ds []*daemon.Daemon) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.APIAddr
	}
	return out
}

// newClient returns a client of endpoints, closed when the test ends.
func newClient(t testing.TB, endpoints ...string) *client.Client {
	t.Helper()
	c, err := client.NewWithOptions(endpoints, client.WithDialTimeout(time.Second),
		client.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatalf("client.New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logger for daemons a test starts itself (not through StartDev).
func testLogger(prefix string) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(testLogLevel()))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("test-node", prefix)
}

// devConfig is node i's config of a dev cluster with free ports.
func devConfig(i int, alg, dataDir string, join []string) config.Config {
	return devcluster.Config(i, devcluster.Options{Algorithm: alg, LogLevel: configLevel(testLogLevel())}, dataDir, join)
}

// ---- ports ----

// freePort returns a loopback port that is free for both TCP and UDP (gossip
// binds both), and that this process has not handed out before: one source
// with the dev clusters' gossip ports (devcluster.FreePort).
func freePort(t testing.TB) int {
	t.Helper()
	p, err := devcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// closedAddr is a loopback address with nothing listening.
func closedAddr(t testing.TB) string { return loopback(freePort(t)) }

// ---- electctl ----

type ctlResult struct {
	code           int
	stdout, stderr string
}

func (r ctlResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// electctl runs the built electctl binary.
func electctl(t testing.TB, args ...string) ctlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, electctlBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("electctl %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("electctl %s did not finish within 30s", strings.Join(args, " "))
	}
	return ctlResult{code, out.String(), errb.String()}
}

// ---- HTTP ----

var httpClient = &http.Client{Timeout: 5 * time.Second}

// httpGet returns the status and body of GET url.
func httpGet(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, body
}
