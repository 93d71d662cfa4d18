package status

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/election"
	"github.com/electord/electord/security"
)

// TestAskChecksTheMemberID: with TLS the page asks member N as node N: a
// node of the cluster presenting node 2's certificate at member 1's
// address is not taken for member 1 (its answer would be shown as member
// 1's), and the error names both; asked as member 2 it answers.
func TestAskChecksTheMemberID(t *testing.T) {
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, "prod", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := apitest.NodeMaterial(ca, dir, 3, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	node2, err := apitest.NodeMaterial(ca, dir, 2, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := apitest.NewCluster(3)
	c.Elect(2)
	s, err := apitest.ServeSecure(c.Node(2), node2, "prod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)

	a := newAsker(viewer.ForwardCredentials)
	defer a.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ans := a.ask(ctx, 1, s.Addr)
	if ans.err == nil {
		t.Fatalf("node 2 answered as member 1 at %s: leader %d", s.Addr, ans.leader)
	}
	if !strings.Contains(ans.err.Error(), "spiffe://prod/node/2, not node 1") || !strings.Contains(ans.err.Error(), s.Addr) {
		t.Errorf("asking member 1 at %s: %v; want an error naming the address and both ids", s.Addr, ans.err)
	}
	if ans := a.ask(ctx, 2, s.Addr); ans.err != nil || ans.leader != election.NodeID(2) {
		t.Fatalf("asking member 2 at %s: %+v", s.Addr, ans)
	}
}
