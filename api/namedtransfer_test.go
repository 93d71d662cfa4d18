package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
)

// namedWorld is one named election, "jobs", as fake nodes share it: who
// leads it, who stands in it, and the transfers the leading node carried
// out.
type namedWorld struct {
	mu        sync.Mutex
	leader    election.NodeID
	standing  map[election.NodeID]bool
	addr      map[election.NodeID]string
	transfers []string
}

// namedNode is a fake node with named elections: it serves "jobs" of its
// world; the rest of the feature is not used by these tests.
type namedNode struct {
	*apitest.Node
	w *namedWorld
}

var _ api.ElectionBackend = namedNode{}

func (n namedNode) Campaign(context.Context, string, string, int64) (*node.Candidacy, error) {
	return nil, fmt.Errorf("not in this fake")
}
func (n namedNode) ListElections(node.ElectionQuery) (node.ElectionsPage, error) {
	return node.ElectionsPage{}, nil
}
func (n namedNode) CampaignWith(context.Context, node.CampaignOptions) (*node.Candidacy, error) {
	return nil, fmt.Errorf("not in this fake")
}
func (n namedNode) CampaignMany(context.Context, []node.CampaignOptions) (*node.CandidacySet, error) {
	return nil, fmt.Errorf("not in this fake")
}
func (n namedNode) WatchElection(context.Context, string) (*node.ElectionWatch, error) {
	return nil, fmt.Errorf("not in this fake")
}
func (n namedNode) ResignElection(context.Context, string) error { return nil }
func (n namedNode) Proclaim(context.Context, string, named.ID, string) error {
	return nil
}

func (n namedNode) ElectionLeader(name string) (node.LeaderInfo, bool) {
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	if name != "jobs" || n.w.leader == 0 {
		return node.LeaderInfo{Election: name, State: node.StateNoLeader}, name == "jobs"
	}
	return node.LeaderInfo{Election: name, ID: n.w.leader, Term: 7, State: node.StateFollower, Self: n.w.leader == n.Self(),
		Address: n.w.addr[n.w.leader]}, true
}

// TransferElection refuses as a node does: a node that does not lead, a
// target that does not stand.
func (n namedNode) TransferElection(_ context.Context, name string, to election.NodeID) error {
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	switch {
	case n.w.leader != n.Self():
		return fmt.Errorf("%w: transfer: node %d does not lead %s", node.ErrNotLeader, n.Self(), name)
	case !n.w.standing[to]:
		return fmt.Errorf("%w: transfer: node %d does not stand in %s", node.ErrNotCandidate, to, name)
	}
	n.w.transfers = append(n.w.transfers, fmt.Sprintf("%d:%s->%d", n.Self(), name, to))
	return nil
}

// serveNamed serves nodes 1–3 of a fake cluster with "jobs" led by node 2,
// nodes 2 and 3 standing in it.
func serveNamed(t *testing.T) (*namedWorld, map[election.NodeID]namedNode) {
	t.Helper()
	c := apitest.NewCluster(3)
	c.Elect(1)
	w := &namedWorld{leader: 2, standing: map[election.NodeID]bool{2: true, 3: true}, addr: map[election.NodeID]string{}}
	nodes := map[election.NodeID]namedNode{}
	for _, id := range []election.NodeID{1, 2, 3} {
		nodes[id] = namedNode{c.Node(id), w}
		s, err := apitest.Serve(nodes[id])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		c.SetAPIAddr(id, s.Addr)
		w.addr[id] = s.Addr
	}
	return w, nodes
}

// A named election's Transfer sent to any node reaches the node that leads
// it (forwarded once) and is refused there for a target that does not
// stand, naming the node and the election; a node that is no member is
// NotFound wherever it is sent.
func TestTransferNamedForwardedToItsLeader(t *testing.T) {
	w, _ := serveNamed(t)
	cl := dialWith(t, w.addr[1], insecure.NewCredentials())
	resp, err := cl.Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetMessage(); got != "node 2 handed the leadership of jobs to node 3" {
		t.Fatalf("message %q", got)
	}
	if fmt.Sprint(w.transfers) != "[2:jobs->3]" {
		t.Fatalf("transfers %v, want node 2's of jobs to 3", w.transfers)
	}
	_, err = cl.Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 1})
	if grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node 1 does not stand in jobs") {
		t.Fatalf("a transfer to a node that does not stand: %v", err)
	}
	if _, err := cl.Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 9}); grpcstatus.Code(err) != codes.NotFound {
		t.Fatalf("a transfer to no member: %v", err)
	}
	if _, err := cl.Transfer(ctx(t), &electordv1.TransferRequest{Election: "no/slash", Id: 3}); grpcstatus.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad name: %v", err)
	}
	// Sent to the leading node itself: no forward.
	resp, err = dialWith(t, w.addr[2], insecure.NewCredentials()).Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 2})
	if err != nil || resp.GetMessage() != "node 2 already leads jobs" {
		t.Fatalf("a transfer to the leading node: %v, %v", resp, err)
	}
	w.mu.Lock()
	w.leader = 0
	w.mu.Unlock()
	_, err = cl.Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 3})
	if grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "jobs has no leader") {
		t.Fatalf("with no leader: %v", err)
	}
}

// POST /elections/{name}/transfer acts on the sidecar's node, with the
// target in the body or the query.
func TestHTTPTransferNamed(t *testing.T) {
	w, nodes := serveNamed(t)
	leader := httptest.NewServer(api.NewHTTPHandler(nodes[2]))
	defer leader.Close()
	follower := httptest.NewServer(api.NewHTTPHandler(nodes[1]))
	defer follower.Close()
	post := func(url, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		url, body string
		code      int
		has       string
	}{
		{leader.URL + "/elections/jobs/transfer", `{"id": 3}`, 200, "transferred jobs to node 3"},
		{leader.URL + "/elections/jobs/transfer?id=3", "", 200, "transferred jobs to node 3"},
		{leader.URL + "/elections/jobs/transfer", "", 400, "a node id is required"},
		{leader.URL + "/elections/jobs/transfer?id=x", "", 400, "id:"},
		{leader.URL + "/elections/jobs/transfer", `{"id": 1}`, 409, "node 1 does not stand in jobs"},
		{follower.URL + "/elections/jobs/transfer", `{"id": 3}`, 409, "node 1 does not lead jobs"},
	} {
		code, body := post(tc.url, tc.body)
		if code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("POST %s %s: %d %s, want %d with %q", tc.url, tc.body, code, body, tc.code, tc.has)
		}
	}
	if code, _, _ := do(t, http.MethodGet, leader.URL+"/elections/jobs/transfer"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", code)
	}
	if fmt.Sprint(w.transfers) != "[2:jobs->3 2:jobs->3]" {
		t.Errorf("transfers %v", w.transfers)
	}
}

// With TLS, resigning or transferring a named election's leadership needs
// the admin role, as for the default election (the app that leads through
// its sidecar on loopback needs none); proclaim passes the interceptor
// with a certificate of the cluster (whose candidacy it may change is
// TestSecureNamedProclaimIsTheCandidacys).
func TestSecureNamedCommandsNeedAdmin(t *testing.T) {
	sc := serveSecure(t)
	client := sc.as(t, security.RoleClient, "app")
	if _, err := client.Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 2}); grpcstatus.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "admin role is required") {
		t.Errorf("Transfer of jobs as a client: %v, want PermissionDenied", err)
	}
	if _, err := client.Resign(ctx(t), &electordv1.ResignRequest{Election: "jobs"}); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("Resign of jobs as a client: %v, want PermissionDenied", err)
	}
	// Past the authorization, the fake serves no named elections.
	if _, err := client.Proclaim(ctx(t), &electordv1.ProclaimRequest{Election: "jobs", Value: "v"}); grpcstatus.Code(err) != codes.Unimplemented {
		t.Errorf("Proclaim as a client: %v, want Unimplemented (authorized)", err)
	}
	admin := dialWith(t, sc.addr[1], credentials.NewTLS(sc.pki.material(t, security.RoleAdmin, "alice", 0, -1).ClientConfig()))
	if _, err := admin.Transfer(ctx(t), &electordv1.TransferRequest{Election: "jobs", Id: 2}); grpcstatus.Code(err) != codes.Unimplemented {
		t.Errorf("Transfer of jobs as an admin: %v, want Unimplemented (authorized)", err)
	}
	if got := sc.sec[1].Denied(); got != 2 {
		t.Errorf("Denied() = %d, want 2", got)
	}
}
