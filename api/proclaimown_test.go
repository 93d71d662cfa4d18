package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
)

// With TLS a candidacy's value is its app's: the identity that opened the
// campaign stream proclaims it (by id, or naming none: its own in the
// election), another identity is refused unless it is an admin, and one
// that names none changes its own candidacy, never the one the node stands
// for; the sidecar on loopback is unchanged.
func TestSecureNamedProclaimIsTheCandidacys(t *testing.T) {
	pki := newSecurePKI(t)
	b := apitest.NamedNode(t)
	s, err := apitest.ServeSecure(b, pki.material(t, security.RoleNode, "", 1, -1), "prod")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	as := func(role security.Role, name string) electordv1.ElectorClient {
		return dialWith(t, s.Addr, credentials.NewTLS(pki.material(t, role, name, 0, -1).ClientConfig()))
	}
	app1, app2, other, admin := as(security.RoleClient, "app-1"), as(security.RoleClient, "app-2"), as(security.RoleClient, "other"),
		as(security.RoleAdmin, "alice")
	campaign := func(cl electordv1.ElectorClient, value string) uint64 {
		t.Helper()
		stream, err := cl.Campaign(ctx(t), &electordv1.CampaignRequest{Election: "jobs", Value: value})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return ev.GetCandidacy()
	}
	c1 := campaign(app1, "a1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) { // polling interval
		if li, _ := b.ElectionLeader("jobs"); li.Self && li.Value == "a1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("app-1's candidacy does not lead jobs after 10s")
		}
	}
	c2 := campaign(app2, "a2") // queued behind app-1's
	leaderValue := func() string {
		t.Helper()
		li, err := admin.GetLeader(ctx(t), &electordv1.GetLeaderRequest{Election: "jobs"})
		if err != nil {
			t.Fatal(err)
		}
		return li.GetValue()
	}
	// The loop publishes a proclaimed value after the call returns, so a
	// reader waits for the value it expects, up to a deadline.
	valueBecomes := func(want string) string {
		t.Helper()
		got := leaderValue()
		for deadline := time.Now().Add(5 * time.Second); got != want && time.Now().Before(deadline); got = leaderValue() {
			time.Sleep(2 * time.Millisecond) // polling interval
		}
		return got
	}
	proclaim := func(cl electordv1.ElectorClient, id uint64, value string) codes.Code {
		_, err := cl.Proclaim(ctx(t), &electordv1.ProclaimRequest{Election: "jobs", Candidacy: id, Value: value})
		return grpcstatus.Code(err)
	}
	for i, tc := range []struct {
		who       electordv1.ElectorClient
		id        uint64
		value     string
		code      codes.Code
		leaderVal string
	}{
		{app1, c1, "a1-b", codes.OK, "a1-b"},                  // its own, by id
		{app1, 0, "a1-c", codes.OK, "a1-c"},                   // its own, naming none
		{app2, c1, "evil", codes.PermissionDenied, "a1-c"},    // another's
		{app2, 0, "a2-b", codes.OK, "a1-c"},                   // naming none: its own, queued
		{other, 0, "evil", codes.PermissionDenied, "a1-c"},    // none of its own
		{app1, c2, "evil", codes.PermissionDenied, "a1-c"},    // another's, queued
		{app1, c1 + 100, "x", codes.PermissionDenied, "a1-c"}, // no such candidacy: not its own either
		{admin, c1, "by-admin", codes.OK, "by-admin"},         // an admin may
		{admin, 0, "by-admin-2", codes.OK, "by-admin-2"},      // 0: the one the node stands for
	} {
		if got := proclaim(tc.who, tc.id, tc.value); got != tc.code {
			t.Errorf("case %d: Proclaim of %d to %q: %v, want %v", i, tc.id, tc.value, got, tc.code)
		}
		if got := valueBecomes(tc.leaderVal); got != tc.leaderVal {
			t.Errorf("case %d: the leader's value is %q, want %q", i, got, tc.leaderVal)
		}
	}
	// The sidecar on loopback takes no identity, as before.
	side := httptest.NewServer(api.NewHTTPHandler(b))
	defer side.Close()
	resp, err := http.Post(side.URL+"/elections/jobs/proclaim", "application/json",
		bytes.NewReader([]byte(fmt.Sprintf(`{"candidacy": %d, "value": "sidecar"}`, c1))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := valueBecomes("sidecar"); resp.StatusCode != http.StatusOK || got != "sidecar" {
		t.Errorf("the sidecar's proclaim: %d, value %q", resp.StatusCode, got)
	}
}
