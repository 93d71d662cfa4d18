package api_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/api/apitest"
	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
)

// TestSecureForwardChecksTheNodeID: a node forwards a command to the node
// id it means, whatever address answers: at the leader's (node 1's)
// address, a node presenting node 2's certificate (a valid node of the
// cluster, and its certificate names 127.0.0.1) is refused, and the
// command is not carried out; with node 1 back at that address, the same
// commands are forwarded and done.
func TestSecureForwardChecksTheNodeID(t *testing.T) {
	sc := serveSecure(t)
	// The impostor serves node 1's backend, so a command it were let take
	// would show on node 1.
	imp, err := apitest.ServeSecure(sc.c.Node(1), sc.node[2], "prod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(imp.Stop)
	sc.c.SetAPIAddr(1, imp.Addr)

	admin := sc.pki.material(t, security.RoleAdmin, "alice", 0, -1)
	via2 := dialWith(t, sc.addr[2], admin.ClientCredentials(security.Expect{NodeID: 2}))
	_, err = via2.Kill(ctx(t), &electordv1.KillRequest{Id: 1})
	if grpcstatus.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "spiffe://prod/node/2, not node 1") ||
		!strings.Contains(err.Error(), imp.Addr) {
		t.Fatalf("Kill(1) via node 2, node 2's certificate at node 1's address: %v; want Unavailable naming the address and both ids", err)
	}
	if sc.c.Killed(1) {
		t.Fatal("node 1 was killed through a node that is not node 1")
	}
	_, err = via2.Transfer(ctx(t), &electordv1.TransferRequest{Id: 2})
	if grpcstatus.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not node 1") {
		t.Fatalf("Transfer(2) via node 2 to a leader that is not node 1: %v; want Unavailable", err)
	}
	if li, err := via2.GetLeader(ctx(t), &electordv1.GetLeaderRequest{}); err != nil || li.GetId() != 1 {
		t.Fatalf("leader after a refused transfer: %v, %v; want node 1", li, err)
	}

	sc.c.SetAPIAddr(1, sc.addr[1])
	if _, err := via2.Kill(ctx(t), &electordv1.KillRequest{Id: 1}); err != nil || !sc.c.Killed(1) {
		t.Fatalf("Kill(1) via node 2 to node 1 itself: %v (killed %v)", err, sc.c.Killed(1))
	}
	if _, err := via2.Revive(ctx(t), &electordv1.ReviveRequest{Id: 1}); err != nil || sc.c.Killed(1) {
		t.Fatalf("Revive(1) via node 2: %v", err)
	}
	sc.c.Elect(1) // the fake cluster elects no one on its own after the kill
	if _, err := via2.Transfer(ctx(t), &electordv1.TransferRequest{Id: 2}); err != nil {
		t.Fatalf("Transfer(2) via node 2 to node 1 itself: %v", err)
	}
}
