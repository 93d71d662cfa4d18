package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// Watches beyond the limit are refused, with the reason, on both the
// sidecar's /watch (503) and WatchLeader (ResourceExhausted); the budget is
// shared, and a closed watch frees its place (issue 11: 2,000 of each were
// accepted).
func TestWatchersAreBounded(t *testing.T) {
	c := apitest.NewCluster(1)
	b := api.LimitWatchers(c.Node(1), 2)
	srv, err := apitest.Serve(b)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	web := httptest.NewServer(api.NewHTTPHandler(b))
	defer web.Close()

	cl := dial(t, srv.Addr)
	ctx := ctxT(t)
	s1, err := cl.WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Recv(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(web.URL + "/watch") // the second watch: allowed
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("second watch (/watch): %v %v", resp, err)
	}
	// The third, either way, is refused.
	s3, err := cl.WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
	if err == nil {
		_, err = s3.Recv()
	}
	wantCode(t, err, codes.ResourceExhausted, "max-watchers")
	r3, err := http.Get(web.URL + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(r3.Body).Decode(&body)
	r3.Body.Close()
	if r3.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body["error"], "max-watchers") {
		t.Fatalf("third watch (/watch): %d %v, want 503 naming max-watchers", r3.StatusCode, body)
	}
	// Closing one frees a place.
	resp.Body.Close()
	if err := c.Node(1).WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s4, err := cl.WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
	if err == nil {
		_, err = s4.Recv()
	}
	if err != nil {
		t.Fatalf("a watch after one closed: %v", err)
	}
}
