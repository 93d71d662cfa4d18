package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/client"
	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/daemontest"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/security"
)

// electord dev --tls: the nodes elect over TLS and encrypted gossip, and
// the printed flags give an admin client.
func TestDevTLS(t *testing.T) {
	dir := t.TempDir()
	opts := devcluster.Options{Nodes: 3, LogLevel: "error"}
	flags, err := devTLS(dir, &opts)
	if err != nil {
		t.Fatal(err)
	}
	out := newLines()
	opts.Out = out
	c, err := devcluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	// Resign once the first elections have settled (under load a
	// campaign may still be crossing the first leader).
	out.wait(t, 20*time.Second, 0, "** all 3 live nodes agree")
	f := strings.Fields(flags)
	if len(f) != 6 || f[0] != "--cacert" || f[2] != "--cert" || f[4] != "--key" {
		t.Fatalf("flags %q", flags)
	}
	cl, err := client.NewWithOptions([]string{c.Nodes[0].APIAddr}, client.WithTLSFiles(f[1], f[3], f[5]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var li client.LeaderInfo
	for {
		li, err = cl.Leader(ctx)
		if err == nil && li.HasLeader() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no leader over TLS: %v, %v", li, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := cl.Resign(ctx); err != nil {
		t.Fatalf("resign as the dev admin: %v (leader %+v)\n%s", err, li, out.String())
	}
	// Plaintext is refused.
	plain, _ := client.NewWithOptions([]string{c.Nodes[0].APIAddr}, client.WithDialTimeout(time.Second))
	defer plain.Close()
	if _, err := plain.Leader(ctx); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext Leader: %v, want Unavailable", err)
	}
}

// A node whose certificate names another node id refuses to start.
func TestStartRefusesAnotherNodesCertificate(t *testing.T) {
	dir := t.TempDir()
	opts := devcluster.Options{Nodes: 1, Algorithm: config.Default().Algorithm}
	if _, err := devTLS(dir, &opts); err != nil {
		t.Fatal(err)
	}
	cfg := devcluster.Config(1, opts, dir, nil)
	cfg.ID = 2
	_, err := daemon.Start(cfg, daemon.Options{})
	if err == nil || !strings.Contains(err.Error(), "names node 1") || !strings.Contains(err.Error(), "this node's id is 2") {
		t.Fatalf("Start = %v, want a refusal naming both ids", err)
	}
}

// http-tls serves the sidecar over TLS with the node's certificate, no
// client certificate asked.
func TestSidecarTLS(t *testing.T) {
	dir := t.TempDir()
	opts := devcluster.Options{Nodes: 1, Algorithm: config.Default().Algorithm, Tune: func(c *config.Config) { c.HTTPTLS = true }}
	if _, err := devTLS(dir, &opts); err != nil {
		t.Fatal(err)
	}
	c, err := devcluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	m, err := security.Load(security.Files{CA: filepath.Join(dir, security.CACertFile)}, security.Options{Poll: -1})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: m.ClientConfig()}}
	resp, err := hc.Get("https://" + c.Nodes[0].HTTPAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz over TLS: %s", resp.Status)
	}
	if resp, err := http.Get("http://" + c.Nodes[0].HTTPAddr + "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
		t.Fatal("plain HTTP answered 200 on the TLS sidecar")
	}
}

// lines is an io.Writer that keeps what a dev cluster prints and lets a
// test wait for a line.
type lines struct {
	mu   sync.Mutex
	buf  strings.Builder
	more chan struct{}
}

func newLines() *lines { return &lines{more: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	select {
	case l.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// wait waits until the output has a line with every one of parts, after
// the first from bytes; it returns the line and where it ends.
func (l *lines) wait(t *testing.T, d time.Duration, from int, parts ...string) (string, int) {
	t.Helper()
	deadline := time.After(d)
	for {
		s := l.String()
		off := from
		for _, line := range strings.SplitAfter(s[from:], "\n") {
			off += len(line)
			ok := strings.HasSuffix(line, "\n")
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line, off
			}
		}
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("no line with %q within %v; output:\n%s", parts, d, s)
		}
	}
}

// electctl kill N --exit in electord dev really ends node N: its daemon
// stops and its api port closes (issue 14: "node 4 is exiting", and node 4
// kept serving). The dev cluster says so, and prints each status page.
func TestDevKillExitEndsTheNode(t *testing.T) {
	out := newLines()
	c, err := devcluster.Start(devcluster.Options{Nodes: 3, LogLevel: "error", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for _, d := range c.Nodes {
		if !strings.Contains(out.String(), "http://"+d.HealthAddr+"/status") || d.HealthAddr == "" {
			t.Fatalf("dev output lacks node %d's status page http://%s/status:\n%s", d.Config.ID, d.HealthAddr, out)
		}
	}
	out.wait(t, 20*time.Second, 0, "** all 3 live nodes agree")
	cl, err := client.New(c.Nodes[0].APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cl.Kill(ctx, 2, true)
	if err != nil || !strings.Contains(res.Message, "node 2 is exiting") || !strings.Contains(res.Message, "for good") {
		t.Fatalf("kill 2 --exit: %+v, %v", res, err)
	}
	out.wait(t, 20*time.Second, 0, "node 2: stopped; its ports are closed")
	if !c.Stopped(2) {
		t.Fatal("node 2 not marked stopped")
	}
	if conn, err := net.DialTimeout("tcp", c.Nodes[1].APIAddr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("node 2's api %s still accepts connections after kill --exit", c.Nodes[1].APIAddr)
	}
	// The others go on, and say node 2 is gone.
	if _, err := cl.Revive(ctx, 2); status.Code(err) != codes.Unavailable {
		t.Fatalf("revive 2 after kill --exit: %v, want Unavailable (its daemon is gone)", err)
	}
	li, err := cl.Leader(ctx)
	if err != nil || !li.HasLeader() {
		t.Fatalf("leader after node 2 ended: %+v, %v", li, err)
	}
}

// electord dev reports a disagreement between live nodes as it happens and
// the recovery when they agree again (issue 14: it never said).
func TestDevReportsDisagreementAndRecovery(t *testing.T) {
	var faults daemontest.Network
	out := newLines()
	c, err := devcluster.Start(devcluster.Options{Nodes: 3, LogLevel: "error", Out: out, Peers: faults.Hook})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	agreed, at := out.wait(t, 20*time.Second, 0, "** all 3 live nodes agree: leader node 3")
	term := agreed[strings.Index(agreed, "term "):strings.LastIndex(agreed, "\n")] // "term 1.3, fencing token 65539"
	// Without quorum, both sides of a partition elect: {1,2} node 2, {3} keeps node 3.
	faults.Partition([]election.NodeID{1, 2}, []election.NodeID{3})
	_, from := out.wait(t, 20*time.Second, at, "!! the live nodes disagree")
	// Each line says which nodes see which leader (the first may come
	// before nodes 1 and 2 agree on node 2; "still disagree" follows).
	_, at = out.wait(t, 20*time.Second, at, "!! the live nodes ", "nodes [1 2] see node 2 leading", "nodes [3] see node 3 leading ("+term+")")
	if from > at {
		t.Fatal("lines out of order")
	}
	faults.Heal()
	out.wait(t, 20*time.Second, at, "** recovered after", "all 3 live nodes agree")
}

// A clean stop of a dev cluster logs no warning or error (issue 14:
// "timeout waiting for leave broadcast", "use of closed network
// connection", a failed handover).
func TestDevStopIsQuiet(t *testing.T) {
	logs := newLines()
	out := newLines()
	c, err := devcluster.Start(devcluster.Options{Nodes: 3, LogLevel: "info", LogOutput: logs, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	out.wait(t, 20*time.Second, 0, "** all 3 live nodes agree")
	// The logs write a term both ways, labelled, as everywhere else.
	m := regexp.MustCompile(`msg="leadership changed" .*term=(\d+)\.(\d+) fencing_token=(\d+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no leadership change logged with term=E.S fencing_token=N:\n%s", logs)
	}
	if e, _ := strconv.ParseUint(m[1], 10, 64); m[3] != strconv.FormatUint(e<<election.SlotBits|mustUint(m[2]), 10) {
		t.Fatalf("term %s.%s logged with fencing token %s", m[1], m[2], m[3])
	}
	from := len(logs.String())
	c.Stop()
	var noisy []string
	for _, l := range strings.Split(logs.String()[from:], "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			noisy = append(noisy, l)
		}
	}
	if len(noisy) > 0 {
		t.Fatalf("a clean stop logged %d warnings or errors:\n%s", len(noisy), strings.Join(noisy, "\n"))
	}
	if !strings.Contains(logs.String()[from:], "level=INFO") {
		t.Fatalf("no info lines on stop at all: is the log captured?\n%s", logs.String())
	}
}

func mustUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
