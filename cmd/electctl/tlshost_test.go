package main

import (
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/security"
)

// TestSecureRefusesANodeNotNamingTheAddress: electctl dialling 127.0.0.1
// is answered by a node of the cluster whose certificate names only
// 10.9.9.9: it refuses the node (exit 3), naming the address and the
// certificate's names, and reads nothing from it.
func TestSecureRefusesANodeNotNamingTheAddress(t *testing.T) {
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, "prod", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, s, err := apitest.ServeSecureOne(ca, dir, "10.9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	crt, key, err := ca.IssueClient(dir, "alice", true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"leader"}, {"kill", "1"}} {
		flags := []string{"--endpoints", s.Addr, "--timeout", "3s", "--cacert", dir + "/" + security.CACertFile, "--cert", crt, "--key", key}
		r := electctl(t, append(flags, args...)...)
		if r.code != ExitUnavailable {
			t.Fatalf("electctl %v against a node whose certificate names only 10.9.9.9 at %s: %+v, want exit %d", args, s.Addr, r, ExitUnavailable)
		}
		for _, want := range []string{s.Addr, "IP:10.9.9.9", "does not name 127.0.0.1"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("electctl %v: stderr %q does not mention %q", args, r.stderr, want)
			}
		}
	}
	if c.Killed(1) {
		t.Fatal("the node was killed through a connection electctl should have refused")
	}
}
