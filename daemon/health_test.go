package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
)

func startDev(t *testing.T, nodes int) *devcluster.Cluster {
	t.Helper()
	c, err := devcluster.Start(devcluster.Options{Nodes: nodes, PeerServer: "grpc", LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Readiness is health, not leadership: every node of a cluster with a
// leader is ready, followers too; a killed follower is alive (its loop
// answers) but not ready, and ready again once revived.
func TestReadyzIsHealthNotLeadership(t *testing.T) {
	c := startDev(t, 3)
	agreedLeader(t, c.Nodes)
	for _, d := range c.Nodes {
		base := "http://" + d.HealthAddr
		waitFor(t, 5*time.Second, "node ready", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
		for _, path := range []string{"/livez", "/readyz", "/healthz"} {
			code, body := get(t, base+path)
			if code != http.StatusOK || !strings.Contains(body, "[+]loop") || !strings.HasSuffix(body, " ok\n") {
				t.Errorf("node %d (leader %v) %s: %d %q", d.Config.ID, d.Node.Leader().Self, path, code, body)
			}
		}
	}
	var follower *daemon.Daemon
	for _, d := range c.Nodes {
		if !d.Node.Leader().Self {
			follower = d
			break
		}
	}
	base := "http://" + follower.HealthAddr
	if err := follower.Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]gossip the node is killed") || !strings.Contains(body, "readyz failed") {
		t.Errorf("killed follower /readyz: %d %q", code, body)
	}
	if code, body := get(t, base+"/livez"); code != http.StatusOK {
		t.Errorf("killed follower /livez: %d %q (its loop still answers)", code, body)
	}
	// JSON names each check.
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rep daemon.HealthReport
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 503 || rep.OK || len(rep.Checks) != 3 || rep.Failed() == "" || !strings.HasPrefix(rep.Failed(), "gossip:") {
		t.Errorf("JSON /healthz: %d %+v %v", resp.StatusCode, rep, err)
	}
	if err := follower.Node.Revive(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the revived node ready", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
}

// A loop that has stopped is not alive.
func TestLivezFailsWhenTheLoopStopped(t *testing.T) {
	c := startDev(t, 1)
	d := c.Nodes[0]
	waitFor(t, 10*time.Second, "ready", func() bool { return d.Ready(context.Background()).OK })
	// Stop's handover and shutdown end the loop but leave nothing serving;
	// ask the daemon directly.
	d.Stop()
	if rep := d.Live(context.Background()); rep.OK || !strings.Contains(rep.Failed(), "loop: the instance loop has stopped") {
		t.Errorf("after Stop: %+v", rep)
	}
	if rep := d.Ready(context.Background()); rep.OK {
		t.Errorf("after Stop, ready: %+v", rep)
	}
}

// A node that cannot persist its term is not ready, and is again once the
// disk takes writes: the term and leader files are replaced by directories
// (a rename onto one fails, and so does opening one to write, for root
// too), then the leader is killed, so the next leadership must be written.
func TestReadyzFailsWhileTheTermCannotBePersisted(t *testing.T) {
	c := startDev(t, 3)
	old := agreedLeader(t, c.Nodes)
	var victim *daemon.Daemon
	for _, d := range c.Nodes {
		if d != old {
			victim = d
			break
		}
	}
	base := "http://" + victim.HealthAddr
	waitFor(t, 5*time.Second, "victim ready", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
	var blocked []string
	for _, name := range []string{"term", "leader"} {
		path := filepath.Join(victim.Config.DataDir, name)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o755); err != nil {
			t.Fatal(err)
		}
		blocked = append(blocked, path)
	}
	if err := old.Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, 10*time.Second, "victim not ready for its term", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "[-]term cannot persist the term")
	})
	if code, b := get(t, base+"/livez"); code != 200 {
		t.Errorf("/livez while the term cannot be persisted: %d %q", code, b)
	}
	if s := scrapeOf(t, victim); s.value("term_persist_fault") != 1 || s.value("term_persist_failures_total") < 1 ||
		s.value("term_persist_seconds", "result", "error") < 1 {
		t.Errorf("metrics while the term cannot be persisted: fault %v, failures %v, failed writes timed %v",
			s.value("term_persist_fault"), s.value("term_persist_failures_total"), s.value("term_persist_seconds", "result", "error"))
	}
	for _, path := range blocked {
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 15*time.Second, "victim ready again", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
	t.Logf("while failing: %s", body)
}
