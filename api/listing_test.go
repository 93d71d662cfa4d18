package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// shards are 150 elections, shard-000 to shard-149.
func shards() []string {
	var names []string
	for i := range 150 {
		names = append(names, fmt.Sprintf("shard-%03d", i))
	}
	return names
}

// ListElections pages (100 by default, the next page's token, how many
// match and how many are known) and filters by prefix, leader and no
// leader; a bad field is InvalidArgument naming it.
func TestListElectionsPagesAndFilters(t *testing.T) {
	b := apitest.NamedNode(t)
	b.CampaignAll(t, "app:1", append(shards(), "jobs")...)
	s, err := apitest.Serve(b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	cl := dialWith(t, s.Addr, insecure.NewCredentials())
	list := func(req *electordv1.ListElectionsRequest) *electordv1.ListElectionsResponse {
		t.Helper()
		p, err := cl.ListElections(ctx(t), req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		return p
	}
	p := list(&electordv1.ListElectionsRequest{})
	if len(p.Elections) != 100 || p.Matched != 151 || p.Total != 151 || p.NextPageToken != "shard-098" || p.Elections[0].Election != "jobs" {
		t.Fatalf("the first page: %d rows from %s, matched %d of %d, next %q", len(p.Elections), p.Elections[0].Election, p.Matched, p.Total, p.NextPageToken)
	}
	p = list(&electordv1.ListElectionsRequest{PageToken: p.NextPageToken})
	if len(p.Elections) != 51 || p.Elections[0].Election != "shard-099" || p.NextPageToken != "" {
		t.Fatalf("the second page: %d rows from %s, next %q", len(p.Elections), p.Elections[0].Election, p.NextPageToken)
	}
	p = list(&electordv1.ListElectionsRequest{Prefix: "shard-1", PageSize: 1000, Leader: 1})
	if len(p.Elections) != 50 || p.Matched != 50 || p.Elections[49].Election != "shard-149" || !p.Elections[0].Leader.GetSelf() {
		t.Fatalf("prefix shard-1 led by node 1: %d rows, matched %d", len(p.Elections), p.Matched)
	}
	if p := list(&electordv1.ListElectionsRequest{Leader: 2}); len(p.Elections) != 0 || p.Matched != 0 || p.Total != 151 {
		t.Fatalf("led by node 2: %v", p)
	}
	if p := list(&electordv1.ListElectionsRequest{Leaderless: true}); p.Matched != 0 {
		t.Fatalf("leaderless: %v", p)
	}
	for _, tc := range []struct {
		req  *electordv1.ListElectionsRequest
		want string
	}{
		{&electordv1.ListElectionsRequest{PageSize: 1001}, "page_size: 1001 is not within 1 to 1000"},
		{&electordv1.ListElectionsRequest{PageToken: "a b"}, "page_token: "},
		{&electordv1.ListElectionsRequest{Prefix: "a/"}, "prefix: "},
		{&electordv1.ListElectionsRequest{Leader: 1, Leaderless: true}, "leader and leaderless"},
	} {
		if _, err := cl.ListElections(ctx(t), tc.req); grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want InvalidArgument with %q", tc.req, err, tc.want)
		}
	}
}

// GET /elections takes the same query as URL parameters.
func TestHTTPListElections(t *testing.T) {
	b := apitest.NamedNode(t)
	b.CampaignAll(t, "app:1", shards()...)
	srv := httptest.NewServer(api.NewHTTPHandler(b))
	defer srv.Close()
	get := func(query string) (int, api.ElectionsBody, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/elections" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		var body api.ElectionsBody
		_ = json.Unmarshal(raw, &body)
		return resp.StatusCode, body, string(raw)
	}
	code, body, _ := get("")
	if code != 200 || len(body.Elections) != 100 || body.Matched != 150 || body.Total != 150 || body.Next != "shard-099" {
		t.Fatalf("GET /elections: %d, %d rows, matched %d of %d, next %q", code, len(body.Elections), body.Matched, body.Total, body.Next)
	}
	code, body, raw := get("?prefix=shard-14&limit=3&after=shard-141&leader=1")
	if code != 200 || len(body.Elections) != 3 || body.Elections[0].Election != "shard-142" || body.Matched != 10 || body.Next != "shard-144" ||
		body.Elections[0].Leader.Value != "app:1" {
		t.Fatalf("a filtered page: %d %s", code, raw)
	}
	for query, want := range map[string]string{
		"?limit=0x":         `limit: \"0x\" is not a number`,
		"?limit=5000":       "limit: 5000 is not within 1 to 1000",
		"?leader=-1":        "leader: ",
		"?leaderless=maybe": "leaderless: ",
		"?after=a%20b":      "after: ",
	} {
		if code, _, raw := get(query); code != http.StatusBadRequest || !strings.Contains(raw, want) {
			t.Errorf("GET /elections%s: %d %s, want 400 with %q", query, code, raw, want)
		}
	}
}
