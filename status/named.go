package status

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
	"github.com/electord/electord/node"
)

// The named elections on the page and in GET /status/elections. A node may
// know thousands of them: the page shows the first namedPage by name and
// how many there are; the JSON pages through them all, at most
// namedPageMax a request. Either costs one pass over the elections' names
// and a copy of the rows shown (node.NamedElectionsPage).
const (
	namedPage    = 100
	namedPageMax = 1000
)

// NamedView is a page of named elections, by name.
type NamedView struct {
	// Total is how many named elections this node knows.
	Total int `json:"total"`
	// Elections are the page's rows.
	Elections []NamedRow `json:"elections"`
	// Next, when more follow, is the after= of the next page (the last
	// name of this one).
	Next string `json:"next,omitempty"`
}

// NamedRow is one named election as this node sees it.
type NamedRow struct {
	Election string          `json:"election"`
	Leader   election.NodeID `json:"leader"` // 0: none known
	// LeaderName is the leading node's name.
	LeaderName string `json:"leader_name,omitempty"`
	// Value is the leading app's value.
	Value string   `json:"value,omitempty"`
	Term  TermView `json:"term"`
	// Since is when this node saw the leadership begin; zero when it does
	// not know (an observer: the Candidacy message does not carry it).
	Since time.Time `json:"since,omitzero"`
	// Self: this node leads (it stands for the leading app).
	Self bool `json:"self"`
	// State is this node's state in the election: leader, follower,
	// electing (it stands and none leads) or no_leader.
	State string `json:"state"`
	// Candidates are the nodes standing, this one included; Local the
	// apps campaigning through this node (queued ones included).
	Candidates int `json:"candidates"`
	Local      int `json:"local_candidacies"`
}

// namedView reads at most limit elections whose names sort after after.
func namedView(n *node.Node, after string, limit int) NamedView {
	page, total := n.NamedElectionsPage(after, limit+1) // one more: does a next page start?
	v := NamedView{Total: total}
	if len(page) > limit {
		page = page[:limit]
		v.Next = page[limit-1].Election
	}
	v.Elections = make([]NamedRow, len(page))
	for i, e := range page {
		li := e.Leader
		v.Elections[i] = NamedRow{Election: e.Election, Leader: li.ID, LeaderName: li.Name, Value: li.Value, Term: termView(li.Term),
			Since: li.Since, Self: li.Self, State: li.State, Candidates: e.Candidates, Local: e.Local}
	}
	return v
}

// elections serves GET /status/elections[?after=NAME][&limit=N]: a page
// of the named elections as JSON (NamedView), namedPage by default.
func (s *Server) elections(w http.ResponseWriter, r *http.Request) {
	after, limit := r.URL.Query().Get("after"), namedPage
	if after != "" {
		if err := named.CheckName(after); err != nil {
			http.Error(w, "status: after: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > namedPageMax {
			http.Error(w, "status: limit: want 1 to "+strconv.Itoa(namedPageMax), http.StatusBadRequest)
			return
		}
		limit = n
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(namedView(s.cfg.Node, after, limit))
}
