package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/client"
	"github.com/electord/electord/election"
	"github.com/electord/electord/security"
)

// serveTLS serves node 1 of a fake cluster with TLS, its certificate
// naming hosts, and returns its address and the files of a reader.
func serveTLS(t *testing.T, hosts ...string) (addr string, reader security.Files) {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, "prod", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, s, err := apitest.ServeSecureOne(ca, dir, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	reader.CA = dir + "/" + security.CACertFile
	if reader.Cert, reader.Key, err = ca.IssueClient(dir, "web", false, time.Hour); err != nil {
		t.Fatal(err)
	}
	return s.Addr, reader
}

// TestTLSChecksTheAddressDialled: a node whose certificate names only
// 10.9.9.9, answering at 127.0.0.1, is refused with an error naming the
// address and the certificate's names (the client checked only that some
// node of the cluster answered before); one naming 127.0.0.1 is not.
func TestTLSChecksTheAddressDialled(t *testing.T) {
	addr, reader := serveTLS(t, "10.9.9.9")
	c := newClient(t, []string{addr}, client.WithTLSFiles(reader.CA, reader.Cert, reader.Key), client.WithDialTimeout(3*time.Second))
	li, err := c.Leader(ctxT(t))
	if err == nil {
		t.Fatalf("a node whose certificate names only 10.9.9.9 answered at %s: leader %d", addr, li.ID)
	}
	for _, want := range []string{addr, "IP:10.9.9.9", "does not name 127.0.0.1", "spiffe://prod/node/1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	addr, reader = serveTLS(t, "127.0.0.1")
	c = newClient(t, []string{addr}, client.WithTLSFiles(reader.CA, reader.Cert, reader.Key))
	if li, err := c.Leader(ctxT(t)); err != nil || li.ID != election.NodeID(1) {
		t.Fatalf("the node whose certificate names 127.0.0.1: leader %+v, %v", li, err)
	}
}
