package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
)

// Every leader answer, default election or named, says within which
// window of the node's wall clock it was decided: inside the request's
// round trip, and far narrower than it can be.
func TestLeaderAnswersSayWhenDecided(t *testing.T) {
	c := apitest.NewCluster(2)
	c.Elect(2)
	def := httptest.NewServer(api.NewHTTPHandler(c.Node(2)))
	defer def.Close()
	b := apitest.NamedNode(t)
	b.CampaignAll(t, "app:1", "jobs")
	named := httptest.NewServer(api.NewHTTPHandler(b))
	defer named.Close()
	for _, url := range []string{def.URL + "/leader", def.URL + "/leader/self", named.URL + "/elections/jobs/leader", named.URL + "/elections/jobs/leader/self"} {
		sent := time.Now()
		code, hdr, body := get(t, url)
		recv := time.Now()
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", url, code, body)
		}
		v := hdr.Get(api.DecidedHeader)
		from, to, ok := api.ParseDecided(v)
		if !ok {
			t.Fatalf("%s: %s = %q, want FROM-TO in Unix ns", url, api.DecidedHeader, v)
		}
		if from.Before(sent) || to.After(recv) {
			t.Errorf("%s: decided in [%v, %v], outside the round trip [%v, %v]", url, from, to, sent, recv)
		}
	}
	for _, bad := range []string{"", "12", "12-", "-12", "a-b", "20-10", "0-10", "1-2-3"} {
		if _, _, ok := api.ParseDecided(bad); ok {
			t.Errorf("ParseDecided(%q) ok, want refused", bad)
		}
	}
}
