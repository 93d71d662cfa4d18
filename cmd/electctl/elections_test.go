package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/electord/electord/api/apitest"
)

// electctl elections shows a page, how many match and the --after of the
// next page; --all every page; the filters reach the node; a bad --limit
// is a usage error.
func TestElectionsPages(t *testing.T) {
	b := apitest.NamedNode(t)
	var names []string
	for i := range 120 {
		names = append(names, fmt.Sprintf("shard-%03d", i))
	}
	b.CampaignAll(t, "app:1", names...)
	s, err := apitest.Serve(b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	r := electctl(t, "--endpoints", s.Addr, "elections", "--limit", "5", "--prefix", "shard-1")
	rows := columns(r.stdout)
	if r.code != ExitOK || len(rows) != 7 || rows[1][0] != "shard-100" || rows[1][1] != "1" || rows[1][2] != "app:1" ||
		!strings.Contains(r.stdout, "5 shown of 20 matching (120 known to the node); next page: --after shard-104") {
		t.Fatalf("a page: %v", r)
	}
	r = electctl(t, "--endpoints", s.Addr, "elections", "--all", "--leader", "1", "--after", "shard-009")
	if rows := columns(r.stdout); r.code != ExitOK || len(rows) != 112 || rows[1][0] != "shard-010" || rows[110][0] != "shard-119" ||
		!strings.Contains(r.stdout, "110 shown of 120 matching") || strings.Contains(r.stdout, "next page") {
		t.Fatalf("--all after shard-009: %d lines, %s", len(rows), r.stdout[len(r.stdout)-200:])
	}
	r = electctl(t, "--endpoints", s.Addr, "-o", "json", "elections", "--leaderless")
	var out struct {
		Elections []json.RawMessage `json:"elections"`
		Matched   int               `json:"matched"`
		Total     int               `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != ExitOK || len(out.Elections) != 0 || out.Matched != 0 || out.Total != 120 {
		t.Fatalf("-o json --leaderless: %v (%v)", r, err)
	}
	if r := electctl(t, "--endpoints", s.Addr, "elections", "--limit", "1001"); r.code != ExitUsage || !strings.Contains(r.stderr, "--limit 1001: want 1 to 1000") {
		t.Errorf("--limit 1001: %v", r)
	}
	if r := electctl(t, "--endpoints", s.Addr, "elections", "--leader", "x"); r.code != ExitUsage {
		t.Errorf("--leader x: %v", r)
	}
}
