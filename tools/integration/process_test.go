package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// proc is one electord OS process started from the built binary.
type proc struct {
	t                        *testing.T
	id                       int
	alg                      string
	api, peer, gossip, httpA string
	dataDir, logPath         string
	join                     []string
	extra                    []string // more flags
	uid                      int      // run as this user (root only); 0: as the test
	cl                       *client.Client
	// out, if set, is the process's stdout and stderr instead of logPath
	// (which still gets the start and exit lines).
	out *os.File

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the Wait error, set before exited is closed
}

func newProc(t *testing.T, dir string, id int, alg string) *proc {
	p := &proc{t: t, id: id, alg: alg,
		api: loopback(freePort(t)), peer: loopback(freePort(t)), gossip: loopback(freePort(t)), httpA: loopback(freePort(t)),
		dataDir: filepath.Join(dir, fmt.Sprintf("node-%d", id)), logPath: filepath.Join(dir, fmt.Sprintf("node-%d.stderr", id)),
	}
	p.cl = newClient(t, p.api)
	return p
}

// procLogLevel is the processes' --log-level: ELECTORD_TEST_PROC_LOG or info.
func procLogLevel() string {
	if l := os.Getenv("ELECTORD_TEST_PROC_LOG"); l != "" {
		return l
	}
	return "info"
}

func (p *proc) args() []string {
	a := []string{
		"--id", strconv.Itoa(p.id), "--algorithm", p.alg,
		"--api-addr", p.api, "--peer-addr", p.peer, "--gossip-addr", p.gossip, "--http-addr", p.httpA,
		"--data-dir", p.dataDir, "--gossip-preset", "local", "--log-level", procLogLevel(),
		"--peer-server", peerServerOf(p.t),
	}
	if len(p.join) > 0 {
		a = append(a, "--join", strings.Join(p.join, ","))
	}
	return append(a, p.extra...)
}

// start runs the process; its stdout and stderr are appended to logPath.
func (p *proc) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	args := p.args()
	fmt.Fprintf(f, "=== %s: electord %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(electordBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if p.out != nil {
		cmd.Stdout, cmd.Stderr = p.out, p.out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.uid)}
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("starting node %d: %v", p.id, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== %s: exited: %v\n", time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		p.err = err
		close(p.exited)
	}()
}

func (p *proc) running() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig and waits for the process to end.
func (p *proc) signal(sig syscall.Signal, timeout time.Duration) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("node %d (pid %d) did not exit within %v of %v", p.id, p.cmd.Process.Pid, timeout, sig)
	}
}

// stop ends the process: SIGTERM, then SIGKILL.
func (p *proc) stop() {
	if err := p.signal(syscall.SIGTERM, 10*time.Second); err != nil {
		p.t.Errorf("%v; killing it", err)
		_ = p.signal(syscall.SIGKILL, 5*time.Second)
	}
}

func (p *proc) log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// startProcs starts n electord processes, node 1 first and the others
// joining it; they are stopped, and their logs printed on failure, when the
// test ends.
func startProcs(t *testing.T, n int, alg string) []*proc { return startProcsWith(t, n, alg, nil) }

// startProcsWith is startProcs with extra flags for every process.
func startProcsWith(t *testing.T, n int, alg string, extra []string) []*proc {
	dir := t.TempDir()
	var ps []*proc
	for i := 1; i <= n; i++ {
		p := newProc(t, dir, i, alg)
		p.extra = extra
		ps = append(ps, p)
	}
	cleanupProcs(t, ps)
	startJoined(ps)
	return ps
}

// startJoined starts ps, each after the first joining the first's gossip.
func startJoined(ps []*proc) {
	for i, p := range ps {
		if i > 0 {
			p.join = []string{ps[0].gossip}
		}
		p.start()
	}
}

// cleanupProcs stops ps when the test ends, and prints their logs if it
// failed.
func cleanupProcs(t *testing.T, ps []*proc) {
	t.Cleanup(func() {
		for _, p := range ps {
			p.stop()
		}
		if t.Failed() {
			for _, p := range ps {
				t.Logf("---- node %d stderr (%s) ----\n%s", p.id, p.logPath, p.log())
			}
		}
	})
}

// procViews asks every process of ps who leads.
func procViews(t *testing.T, ps []*proc) ([]client.LeaderInfo, string) {
	var b strings.Builder
	views := make([]client.LeaderInfo, len(ps))
	for i, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		li, err := p.cl.Leader(ctx)
		cancel()
		views[i] = li
		if err != nil {
			fmt.Fprintf(&b, "%d:error(%v) ", p.id, err)
			continue
		}
		fmt.Fprintf(&b, "%d:%d@%v/%s ", p.id, li.ID, li.Term, li.State)
	}
	return views, b.String()
}

// procAgreement reports whether every view names the same leader in the
// same term, the leader's own view saying it leads.
func procAgreement(ps []*proc, views []client.LeaderInfo) (client.LeaderInfo, bool) {
	first := views[0]
	if !first.HasLeader() {
		return first, false
	}
	for i, v := range views {
		if v.ID != first.ID || v.Term != first.Term || v.Self != (ps[i].id == int(v.ID)) {
			return first, false
		}
	}
	return first, true
}

// waitProcAgreement waits until every process of ps names the same leader
// in the same term (and extra, if given, holds for it), and returns it.
func waitProcAgreement(t *testing.T, ps []*proc, timeout time.Duration, what string, extra func(client.LeaderInfo) bool) client.LeaderInfo {
	t.Helper()
	var agreed client.LeaderInfo
	eventually(t, timeout, what, func() (bool, string) {
		views, desc := procViews(t, ps)
		li, ok := procAgreement(ps, views)
		agreed = li
		return ok && (extra == nil || extra(li)), desc
	})
	return agreed
}

func procByID(ps []*proc, id client.NodeID) *proc {
	for _, p := range ps {
		if p.id == int(id) {
			return p
		}
	}
	return nil
}

// TestProcessSIGKILL: three separate electord processes elect a leader;
// SIGKILL of the leader's process makes the survivors agree on another
// leader in a higher term within 5 s; the killed node, restarted with its
// data dir, follows the current leader (which keeps its term: leadership is
// sticky), and never reports a term below the one it led in.
func TestProcessSIGKILL(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		testKillRestart(t, alg, nil)
	})
}

// TestProcessFastRestartFollows is TestProcessSIGKILL with the restarted
// node's leader timeout cut to 80 ms. That only makes a race certain: the
// node restarts before gossip has declared its old incarnation dead, so the
// sitting leader gets no Join for it and does not announce itself at once;
// the restarted node must still not depose it.
func TestProcessFastRestartFollows(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		testKillRestart(t, alg, []string{"--heartbeat-interval", "20ms", "--heartbeat-timeout", "80ms"})
	})
}

func testKillRestart(t *testing.T, alg string, restartFlags []string) {
	ps := startProcs(t, 3, alg)
	l0 := waitProcAgreement(t, ps, 15*time.Second, "three processes agree on a leader", nil)
	t.Logf("processes agree: node %d leads in term %v", l0.ID, l0.Term)

	victim := procByID(ps, l0.ID)
	if err := victim.signal(syscall.SIGKILL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	var survivors []*proc
	for _, p := range ps {
		if p != victim {
			survivors = append(survivors, p)
		}
	}
	l1 := waitProcAgreement(t, survivors, 5*time.Second, "the survivors agree on a new leader in a higher term", func(li client.LeaderInfo) bool {
		return li.ID != l0.ID && li.Term > l0.Term
	})
	t.Logf("after SIGKILL of node %d: node %d leads in term %v, %v later", l0.ID, l1.ID, l1.Term, time.Since(killedAt).Round(time.Millisecond))

	// Restart it with the same data dir and ports, joining the survivors.
	victim.join = nil
	for _, p := range survivors {
		victim.join = append(victim.join, p.gossip)
	}
	victim.extra = restartFlags
	victim.start()
	restartedAt := time.Now()
	var lowest []string
	var l2 client.LeaderInfo
	eventually(t, 10*time.Second, "all three processes agree after the restart", func() (bool, string) {
		views, desc := procViews(t, ps)
		// Every answer of the restarted node that names a leader must be
		// at or above the term it led in.
		for i, p := range ps {
			if p == victim && views[i].HasLeader() && views[i].Term < l0.Term {
				lowest = append(lowest, fmt.Sprintf("leader %d term %v", views[i].ID, views[i].Term))
			}
		}
		var ok bool
		l2, ok = procAgreement(ps, views)
		return ok, desc
	})
	t.Logf("node %d restarted; after %v the cluster agrees on node %d in term %v", victim.id,
		time.Since(restartedAt).Round(time.Millisecond), l2.ID, l2.Term)
	switch {
	case l2.ID != l1.ID:
		t.Errorf("the restarted node %d deposed the sitting leader: the cluster follows node %d in term %v, not node %d in term %v",
			victim.id, l2.ID, l2.Term, l1.ID, l1.Term)
	case l2.Term != l1.Term:
		t.Errorf("the restarted node %d forced an election: node %d still leads, but in term %v instead of %v",
			victim.id, l2.ID, l2.Term, l1.Term)
	}
	if len(lowest) > 0 {
		t.Errorf("the restarted node %d reported terms below %v (the term it led in): %v", victim.id, l0.Term, lowest)
	}
	if v, err := victim.cl.Leader(ctxTimeout(t, time.Second)); err != nil || v.Term < l0.Term {
		t.Errorf("restarted node %d: %+v, %v; want a term >= %v", victim.id, v, err, l0.Term)
	}
	if !victim.running() {
		t.Errorf("restarted node %d exited: %v", victim.id, victim.err)
	}
}

// TestProcessBadConfig: an invalid config exits 2 before binding any port,
// naming the bad key; an unknown key in a YAML --config file is named too.
// The config is the same for both algorithms, so this runs once.
func TestProcessBadConfig(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, watchPort string, args ...string) (int, string) {
		t.Helper()
		var bound atomic.Bool
		stopWatch := make(chan struct{})
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			for {
				if c, err := net.DialTimeout("tcp", watchPort, 50*time.Millisecond); err == nil {
					c.Close()
					bound.Store(true)
				}
				select {
				case <-stopWatch:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		cmd := exec.Command(electordBin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("electord %s did not exit within 10s; stderr:\n%s", strings.Join(args, " "), stderr.String())
		}
		close(stopWatch)
		<-watchDone
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if bound.Load() {
			t.Errorf("electord %s: port %s accepted a connection while it ran", strings.Join(args, " "), watchPort)
		}
		// Nothing holds the port now.
		l, lerr := net.Listen("tcp", watchPort)
		if lerr != nil {
			t.Errorf("port %s is not free after electord exited: %v", watchPort, lerr)
		} else {
			l.Close()
		}
		return code, stderr.String()
	}
	addrs := func(api string) []string {
		return []string{"--api-addr", api, "--peer-addr", closedAddr(t), "--gossip-addr", closedAddr(t), "--http-addr", closedAddr(t),
			"--gossip-preset", "local"}
	}

	t.Run("heartbeat-timeout", func(t *testing.T) {
		p := closedAddr(t)
		args := append([]string{"--id", "1", "--heartbeat-interval", "100ms", "--heartbeat-timeout", "50ms"}, addrs(p)...)
		code, stderr := run(t, p, args...)
		if code != 2 || !strings.Contains(stderr, "heartbeat-timeout") {
			t.Errorf("electord %s: exit %d, stderr:\n%s\nwant exit 2 naming heartbeat-timeout", strings.Join(args, " "), code, stderr)
		}
	})

	t.Run("unknown-yaml-key", func(t *testing.T) {
		p := closedAddr(t)
		file := filepath.Join(t.TempDir(), "electord.yaml")
		yaml := "id: 1\nalgorithm: ring\nheartbeat-intervall: 100ms\n"
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--config", file}, addrs(p)...)
		code, stderr := run(t, p, args...)
		if code != 2 || !strings.Contains(stderr, "heartbeat-intervall") {
			t.Errorf("electord --config with %q: exit %d, stderr:\n%s\nwant exit 2 naming heartbeat-intervall", yaml, code, stderr)
		}
	})
}
