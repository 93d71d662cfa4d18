package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/status"
)

// The page and GET /status/elections show the named elections: the page
// the first 100 by name and how many there are, the JSON every one of
// them by pages, each with its leader, value, token, this node's state
// and the apps campaigning through this node. Here node A stands in 150
// elections and node B, whose page is read, stands in one of them behind
// A and observes the rest.
func TestStatusShowsNamedElections(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Nodes: 2, Algorithm: "bully", LogLevel: "warn"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	waitLeader(t, c, 0)
	a, b := c.Nodes[0], c.Nodes[1]
	ctx := context.Background()
	const total = 150
	for i := range total {
		cand, err := a.Node.Campaign(ctx, fmt.Sprintf("e%03d", i), fmt.Sprintf("app-a-%d", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer cand.Close()
	}
	waitNamed := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s (b knows %+v)", what, b.Node.NamedCounts())
			}
		}
	}
	waitNamed("b sees a lead all 150", func() bool {
		page, n := b.Node.NamedElectionsPage("", total)
		if n != total || len(page) != total {
			return false
		}
		for _, e := range page {
			if e.Leader.ID != a.Node.Self() {
				return false
			}
		}
		return true
	})
	cb, err := b.Node.Campaign(ctx, "e000", "app-b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	waitNamed("b stands in e000 behind a", func() bool {
		li, _ := b.Node.ElectionLeader("e000")
		return li.ID == a.Node.Self() && li.State == "follower"
	})

	_, hs := serve(t, status.Config{Node: b.Node, Poll: 50 * time.Millisecond})
	body := get(t, hs.URL+"/status")
	rows := regexp.MustCompile(`<tr data-election="(e\d+)" data-leader="(\d+)" data-token="(\d+)" data-local="(\d+)">`).FindAllStringSubmatch(body, -1)
	if len(rows) != 100 || rows[0][1] != "e000" || rows[99][1] != "e099" {
		t.Fatalf("%d rows on the page (want the first 100 by name)", len(rows))
	}
	if !strings.Contains(body, `id="named" data-total="150" data-count="100"`) || !strings.Contains(body, "the first 100 of 150 by name") {
		t.Errorf("the page does not say it shows 100 of 150")
	}
	if rows[0][2] != fmt.Sprint(a.Node.Self()) || rows[0][3] == "0" || rows[0][4] != "1" || rows[1][4] != "0" {
		t.Errorf("rows %v / %v: want leader %d with a token, one app here in e000 only", rows[0], rows[1], a.Node.Self())
	}
	if !strings.Contains(body, "app-a-0") {
		t.Errorf("the leading app's value is not shown")
	}

	// The summary per node: a leads and stands in all 150, b stands in one.
	for _, want := range []string{fmt.Sprintf(`data-node="%d" data-leads="150" data-stands="150"`, a.Node.Self()),
		fmt.Sprintf(`data-node="%d" data-leads="0" data-stands="1"`, b.Node.Self()), `data-leaderless="0"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the summary per node lacks %s", want)
		}
	}
	var f status.NamedView
	if err := json.Unmarshal([]byte(get(t, hs.URL+"/status/elections?prefix=e14&leader="+fmt.Sprint(a.Node.Self()))), &f); err != nil {
		t.Fatal(err)
	}
	if f.Matched != 10 || len(f.Elections) != 10 || f.Total != total || len(f.ByNode) != 2 || f.ByNode[0].Leads+f.ByNode[1].Leads != total {
		t.Errorf("prefix e14 led by a: matched %d, %d rows of %d, by node %+v", f.Matched, len(f.Elections), f.Total, f.ByNode)
	}

	// The JSON, by pages of 60: 60, 60, 30, every name once, in order.
	var names []string
	after := ""
	for page := 0; ; page++ {
		var v status.NamedView
		if err := json.Unmarshal([]byte(get(t, hs.URL+"/status/elections?limit=60&after="+after)), &v); err != nil {
			t.Fatal(err)
		}
		if v.Total != total {
			t.Fatalf("total %d", v.Total)
		}
		for _, e := range v.Elections {
			names = append(names, e.Election)
			if e.Election == "e000" && (e.Local != 1 || e.State != "follower" || e.Value != "app-a-0" || e.Candidates != 2 || e.Term.Token == 0) {
				t.Errorf("e000: %+v", e)
			}
			if e.Election == "e001" && (e.Local != 0 || e.Leader != a.Node.Self() || e.Self || e.Term.Human == "") {
				t.Errorf("e001: %+v", e)
			}
		}
		if v.Next == "" {
			break
		}
		if page > 3 || v.Next != names[len(names)-1] {
			t.Fatalf("next %q after %d names", v.Next, len(names))
		}
		after = v.Next
	}
	if len(names) != total || names[0] != "e000" || names[total-1] != "e149" {
		t.Fatalf("%d names by page, first %v", len(names), names[:min(3, len(names))])
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?after=a/b", "?prefix=a%20", "?leader=x", "?leaderless=2"} {
		resp, err := http.Get(hs.URL + "/status/elections" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s, want 400", bad, resp.Status)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}
