package status

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// The named elections on the page and in GET /status/elections. A node may
// know thousands of them: the page shows the first named.PageDefault by
// name, how many there are, and per node how many it leads and stands in;
// the JSON pages through them all, at most named.PageMax a request, with
// the filters of every listing (node.ElectionQuery). Either costs one pass
// over the elections and a copy of the rows shown (node.ListElections).

// NamedView is a page of named elections, by name.
type NamedView struct {
	// Total is how many named elections this node knows.
	Total int `json:"total"`
	// Elections are the page's rows.
	Elections []NamedRow `json:"elections"`
	// Matched: the elections that pass the query's filters, on every page.
	Matched int `json:"matched"`
	// Next, when more follow, is the after= of the next page (the last
	// name of this one).
	Next string `json:"next,omitempty"`
	// ByNode is, per node, how many elections it leads and stands in, as
	// this node sees them (its size is the cluster's: the summary that stays
	// readable with 10,000 elections).
	ByNode []NodeTally `json:"by_node"`
	// Leaderless: the elections with no leader known to this node, of all
	// of them.
	Leaderless int `json:"leaderless"`
}

// NodeTally is one node's share of the named elections.
type NodeTally struct {
	ID   election.NodeID `json:"id"`
	Name string          `json:"name,omitempty"`
	// Leads and Stands: the elections it leads, and those it stands in.
	Leads  int `json:"leads"`
	Stands int `json:"stands"`
	// Alive: a live member as this node sees it.
	Alive bool `json:"alive"`
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

// namedView reads the page of q (checked: its error is the caller's), and
// the tallies per node.
func namedView(n *node.Node, q node.ElectionQuery) (NamedView, error) {
	p, err := n.ListElections(q)
	if err != nil {
		return NamedView{}, err
	}
	v := NamedView{Total: p.Total, Matched: p.Matched, Next: p.Next}
	v.Elections = make([]NamedRow, len(p.Elections))
	for i, e := range p.Elections {
		li := e.Leader
		v.Elections[i] = NamedRow{Election: e.Election, Leader: li.ID, LeaderName: li.Name, Value: li.Value, Term: termView(li.Term),
			Since: li.Since, Self: li.Self, State: li.State, Candidates: e.Candidates, Local: e.Local}
	}
	members := map[election.NodeID]node.MemberInfo{}
	for _, m := range n.Members() {
		members[m.ID] = m
	}
	for _, t := range n.NamedByNode() {
		m := members[t.ID]
		v.ByNode = append(v.ByNode, NodeTally{ID: t.ID, Name: m.Name, Leads: t.Leads, Stands: t.Stands, Alive: m.Alive})
	}
	v.Leaderless = n.NamedCounts().Leaderless
	return v, nil
}

// elections serves GET /status/elections[?after=NAME][&limit=N]
// [&prefix=P][&leader=ID][&leaderless=true]: a page of the named elections
// as JSON (NamedView), named.PageDefault by default; 400 naming a bad
// parameter.
func (s *Server) elections(w http.ResponseWriter, r *http.Request) {
	q, err := node.ElectionQueryFromURL(r.URL.Query())
	var v NamedView
	if err == nil {
		v, err = namedView(s.cfg.Node, q)
	}
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}
