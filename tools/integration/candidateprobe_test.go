package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// healthAppEnv makes this test binary a health app (see TestMain): it serves
// 200 on /healthz at the address the variable holds until it is killed.
const healthAppEnv = "ELECTORD_INTEGRATION_HEALTH_APP"

// runHealthApp is the health app's main.
func runHealthApp(addr string) int {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	err := http.ListenAndServe(addr, mux)
	fmt.Fprintln(os.Stderr, "health app:", err)
	return 1
}

// startHealthApp starts a health app process on addr and waits until it
// answers; it is killed when the test ends.
func startHealthApp(t *testing.T, addr string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), healthAppEnv+"="+addr)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killHealthApp(cmd) })
	eventually(t, 10*time.Second, "the health app answers", func() (bool, string) {
		resp, err := httpClient.Get("http://" + addr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return cmd
}

// killHealthApp SIGKILLs the app and reaps it.
func killHealthApp(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// candidateProbePeriod is the probe period of TestCandidateProbeAppKilled.
const candidateProbePeriod = 100 * time.Millisecond

// handoverDeadline bounds a graceful handover (the resign path: one
// TimeoutNow and the new leader's announcement, a few milliseconds on a
// quiet host) as an observer sees it, with room for a loaded CI host.
const handoverDeadline = 2 * time.Second

// TestCandidateProbeAppKilled: three electord processes; node 3, which
// leads, has --candidate-probe on a health app process. SIGKILL of the app
// (its node lives) moves the leadership to another node within one probe
// period plus a handover, as an observer on node 1 sees it; while the app
// is dead node 3 never leads, not even when the node that took over is
// killed too, and its metrics say it does not stand. The app restarted,
// node 3 stands again: it does not depose the sitting leader (sticky), and
// leads when that one stops.
func TestCandidateProbeAppKilled(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		dir := t.TempDir()
		appAddr, health := loopback(freePort(t)), loopback(freePort(t))
		app := startHealthApp(t, appAddr)
		var ps []*proc
		for i := 1; i <= 3; i++ {
			ps = append(ps, newProc(t, dir, i, alg))
		}
		ps[2].extra = []string{"--candidate-probe", "http://" + appAddr + "/healthz", "--candidate-probe-period", candidateProbePeriod.String(),
			"--candidate-probe-timeout", (candidateProbePeriod / 2).String(), "--health-addr", health}
		cleanupProcs(t, ps)
		startJoined(ps)
		l0 := waitProcAgreement(t, ps, 20*time.Second, "node 3 leads", func(li client.LeaderInfo) bool { return li.ID == 3 })
		metric := func(name string) float64 {
			_, b := httpGet(t, "http://"+health+"/metrics")
			return metricValue(string(b), name)
		}
		if s, ok := metric("electord_standing"), metric("electord_candidate_probe_ok"); s != 1 || ok != 1 {
			t.Fatalf("node 3 with its app up: electord_standing %v, electord_candidate_probe_ok %v; want 1 and 1", s, ok)
		}

		// Every leadership node 3 shows, from before the kill to the app's
		// restart: none may name itself.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		claims := make(chan client.LeaderInfo, 1)
		node3 := newClient(t, ps[2].api).Watch(ctx)
		if ev := <-node3; ev.Err != nil || ev.Leader.ID != 3 {
			t.Fatalf("node 3's first watch event: %+v", ev)
		}
		var appDead = make(chan struct{})
		go func() {
			<-appDead
			for ev := range node3 {
				if ev.Err == nil && ev.Leader.Self {
					select {
					case claims <- ev.Leader:
					default:
					}
				}
			}
		}()
		observer := newClient(t, ps[0].api).Watch(ctx)
		if ev := <-observer; ev.Err != nil || ev.Leader.ID != 3 {
			t.Fatalf("node 1's first watch event: %+v", ev)
		}

		killHealthApp(app)
		killed := time.Now()
		close(appDead)
		var moved client.LeaderInfo
		timeout := time.After(candidateProbePeriod + handoverDeadline)
		for !moved.HasLeader() {
			select {
			case ev := <-observer:
				if ev.Err == nil && ev.Leader.HasLeader() && ev.Leader.ID != 3 {
					moved = ev.Leader
				}
			case <-timeout:
				t.Fatalf("node 1 saw no leader other than node 3 within %v of the app's death", candidateProbePeriod+handoverDeadline)
			}
		}
		t.Logf("app killed: node 1 sees node %d lead at %v, %v after the kill (probe period %v)",
			moved.ID, moved.Term, time.Since(killed).Round(time.Millisecond), candidateProbePeriod)
		if moved.Term <= l0.Term {
			t.Fatalf("the new leadership's term %v is not above node 3's %v", moved.Term, l0.Term)
		}
		waitProcAgreement(t, ps, 10*time.Second, "all agree on the new leader, node 3 following",
			func(li client.LeaderInfo) bool { return li.ID == moved.ID })
		if s, ok := metric("electord_standing"), metric("electord_candidate_probe_ok"); s != 0 || ok != 0 {
			t.Fatalf("node 3 with its app dead: electord_standing %v, electord_candidate_probe_ok %v; want 0 and 0", s, ok)
		}
		st, err := newClient(t, ps[2].api).Status(ctxTimeout(t, 5*time.Second))
		if err != nil || !strings.Contains(st.NotStanding, "candidate probe http://"+appAddr+"/healthz fails") ||
			!strings.Contains(st.NotStanding, "connection refused") {
			t.Fatalf("node 3's status with its app dead: not_standing %q, %v; want the probe's URL and its refused connection", st.NotStanding, err)
		}
		if r := electctl(t, "--endpoints", ps[2].api, "status"); r.code != exitOK || !strings.Contains(r.stdout, "node 3 does not stand: the candidate probe") {
			t.Fatalf("electctl status on node 3 with its app dead: %v", r)
		}

		// The new leader dies too: the last node that stands leads, not node 3.
		var other *proc
		for _, p := range ps[:2] {
			if p.id != int(moved.ID) {
				other = p
			}
		}
		if err := procByID(ps, moved.ID).signal(syscall.SIGKILL, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		l2 := waitProcAgreement(t, []*proc{other, ps[2]}, 10*time.Second, fmt.Sprintf("node %d leads after node %d died", other.id, moved.ID),
			func(li client.LeaderInfo) bool { return li.ID == client.NodeID(other.id) })

		// The app back: node 3 stands again, and does not depose node l2.
		startHealthApp(t, appAddr)
		eventually(t, 10*time.Second, "node 3 stands again", func() (bool, string) {
			s := metric("electord_standing")
			return s == 1, fmt.Sprintf("electord_standing %v", s)
		})
		if st, err := newClient(t, ps[2].api).Status(ctxTimeout(t, 5*time.Second)); err != nil || st.NotStanding != "" {
			t.Fatalf("node 3's status with its app back: not_standing %q, %v", st.NotStanding, err)
		}
		select {
		case li := <-claims:
			t.Fatalf("node 3 claimed leadership while its app was dead: %+v", li)
		default:
		}
		cancel()
		// Sticky: a heartbeat timeout and more (the defaults: 600ms) with
		// node 3 standing, and the same leadership.
		time.Sleep(time.Second)
		if l3 := waitProcAgreement(t, []*proc{other, ps[2]}, 5*time.Second, "the same leader", nil); l3.ID != l2.ID || l3.Term != l2.Term {
			t.Fatalf("node 3 standing again moved the leadership: %d@%v -> %d@%v", l2.ID, l2.Term, l3.ID, l3.Term)
		}
		// It stands: with node l2 gone, it leads.
		other.stop()
		waitProcAgreement(t, ps[2:], 10*time.Second, "node 3 leads once the others are gone", func(li client.LeaderInfo) bool { return li.ID == 3 })
	})
}

// TestCandidateProbeWithPreempt: with --preempt on every node, node 3 (the
// highest) leads; its app killed, node 2 takes over and keeps the
// leadership (no node hands it back to node 3 while its probe fails); the
// app back, preemption gives node 3 the leadership again.
func TestCandidateProbeWithPreempt(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		dir := t.TempDir()
		appAddr := loopback(freePort(t))
		app := startHealthApp(t, appAddr)
		var ps []*proc
		for i := 1; i <= 3; i++ {
			p := newProc(t, dir, i, alg)
			p.extra = []string{"--preempt"}
			ps = append(ps, p)
		}
		ps[2].extra = append(ps[2].extra, "--candidate-probe", "http://"+appAddr+"/healthz", "--candidate-probe-period", candidateProbePeriod.String(),
			"--candidate-probe-timeout", (candidateProbePeriod / 2).String())
		cleanupProcs(t, ps)
		startJoined(ps)
		waitProcAgreement(t, ps, 20*time.Second, "node 3 leads", func(li client.LeaderInfo) bool { return li.ID == 3 })
		killHealthApp(app)
		l1 := waitProcAgreement(t, ps, candidateProbePeriod+handoverDeadline, "node 2 leads",
			func(li client.LeaderInfo) bool { return li.ID == 2 })
		// Settled: a heartbeat timeout and more (the defaults: 600ms), and
		// the same leadership.
		time.Sleep(2 * time.Second)
		if l2 := waitProcAgreement(t, ps, 5*time.Second, "the same leader", nil); l2.ID != 2 || l2.Term < l1.Term || l2.Term.Epoch() > l1.Term.Epoch()+1 {
			t.Fatalf("with node 3's app dead the leadership moved on: %d@%v -> %d@%v", l1.ID, l1.Term, l2.ID, l2.Term)
		}
		startHealthApp(t, appAddr)
		waitProcAgreement(t, ps, 10*time.Second, "node 3 leads again (preempt)", func(li client.LeaderInfo) bool { return li.ID == 3 })
	})
}
