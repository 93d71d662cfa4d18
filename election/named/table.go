package named

import (
	"maps"
	"slices"

	"github.com/electord/electord/election"
)

// Stand is one node's candidacy in one election, as that node announced it.
type Stand struct {
	Priority int64
	Value    string
	// LeaderTerm: the term the node says it leads at; 0 when it does not lead.
	LeaderTerm election.Term
}

// Table is what this node knows of the other nodes' candidacies: per
// election, the nodes that stand in it. Nodes learn it from each other's
// Candidacy messages, and forget a node's candidacies when gossip says it
// is gone. The zero value is ready to use.
type Table struct {
	stands map[string]map[election.NodeID]Stand
}

// Set records that node stands in election as s, and says whether the node
// is new to that election (its state machine must hear of it) or its
// priority changed (it ranks elsewhere now).
func (t *Table) Set(name string, node election.NodeID, s Stand) (joined, reranked bool) {
	if t.stands == nil {
		t.stands = map[string]map[election.NodeID]Stand{}
	}
	m := t.stands[name]
	if m == nil {
		m = map[election.NodeID]Stand{}
		t.stands[name] = m
	}
	old, had := m[node]
	m[node] = s
	return !had, had && old.Priority != s.Priority
}

// Withdraw forgets node's candidacy in election and says whether it had one.
func (t *Table) Withdraw(name string, node election.NodeID) bool {
	m := t.stands[name]
	if _, ok := m[node]; !ok {
		return false
	}
	delete(m, node)
	if len(m) == 0 {
		delete(t.stands, name)
	}
	return true
}

// Forget drops every candidacy of node (gossip says it is gone) and
// returns the elections it stood in, sorted.
func (t *Table) Forget(node election.NodeID) []string {
	var names []string
	for name, m := range t.stands {
		if _, ok := m[node]; ok {
			names = append(names, name)
			delete(m, node)
			if len(m) == 0 {
				delete(t.stands, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Get is node's candidacy in election.
func (t *Table) Get(name string, node election.NodeID) (Stand, bool) {
	s, ok := t.stands[name][node]
	return s, ok
}

// Members are the nodes standing in election, as state machine members
// (their priority is their candidacy's), sorted by id.
func (t *Table) Members(name string) []election.Member {
	m := t.stands[name]
	out := make([]election.Member, 0, len(m))
	for id, s := range m {
		out = append(out, election.Member{ID: id, Priority: s.Priority})
	}
	slices.SortFunc(out, func(a, b election.Member) int { return a.Rank().Compare(b.Rank()) })
	return out
}

// Leader is the leader an observer shows: of the nodes that say they lead
// election, the one at the highest term (terms have one owner each, so
// there is no tie), or ok false when none says so.
func (t *Table) Leader(name string) (node election.NodeID, s Stand, ok bool) {
	for id, st := range t.stands[name] {
		if st.LeaderTerm != 0 && (!ok || st.LeaderTerm > s.LeaderTerm) {
			node, s, ok = id, st, true
		}
	}
	return node, s, ok
}

// Elections lists the elections in which some other node stands, sorted.
func (t *Table) Elections() []string { return slices.Sorted(maps.Keys(t.stands)) }
