package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/client"
	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election/algorithms"
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
	var out bytes.Buffer
	opts.Out = &out
	c, err := devcluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
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
		t.Fatalf("resign as the dev admin: %v", err)
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
	opts := devcluster.Options{Nodes: 1, Algorithm: algorithms.Default}
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
	opts := devcluster.Options{Nodes: 1, Algorithm: algorithms.Default, Tune: func(c *config.Config) { c.HTTPTLS = true }}
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
