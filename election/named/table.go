package named

import (
	"cmp"
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
	// LeaderSince: when that leadership began by the node's own clock, in
	// Unix nanoseconds; 0 when it does not lead or did not say.
	LeaderSince int64
}

// Table is what this node knows of the other nodes' candidacies: per
// election, the nodes that stand in it. Nodes learn it from each other's
// Candidacy messages, and forget a node's candidacies when gossip says it
// is gone, or when the node speaks as a later incarnation (Renew). The zero
// value is ready to use.
type Table struct {
	stands map[string]stands
	// incarnations: the latest incarnation each node spoke as (Renew).
	incarnations map[election.NodeID]uint64
	// sums: each node's digest of its candidacies in stands, kept by every
	// change of them (resum).
	sums map[election.NodeID]*Digest
}

// stand is one node's candidacy in an election's entry of the table.
type stand struct {
	node election.NodeID
	Stand
}

// stands are the candidacies of one election, sorted by node. A node
// knows thousands of elections with the same handful of candidates: a
// small slice each costs a fraction of a map each (a map's header and
// group, about 460 B with four candidates, against 48 B a candidacy).
type stands []stand

func (ss stands) index(node election.NodeID) (int, bool) {
	return slices.BinarySearchFunc(ss, node, func(e stand, n election.NodeID) int { return cmp.Compare(e.node, n) })
}

// Renewal is what a node's incarnation says of its word (Renew).
type Renewal uint8

const (
	// Current: the incarnation this node knows the sender by, or one not
	// given (0: an older node).
	Current Renewal = iota
	// Restarted: a later incarnation than the one heard before.
	Restarted
	// Stale: an earlier incarnation than one heard before.
	Stale
)

// Renew records that node speaks as incarnation inc (0: the node does not
// say, and nothing is recorded). A node's incarnation is new at each start
// of its process and only grows, so:
//   - a lower incarnation than one heard before is the word of a process
//     that is gone: Stale, to be ignored;
//   - a higher one means the node restarted, however quickly (gossip may
//     never have seen it leave): Restarted, and its candidacies of the
//     earlier incarnation, which died with that process, are forgotten
//     here; voided lists their elections, sorted.
func (t *Table) Renew(node election.NodeID, inc uint64) (r Renewal, voided []string) {
	if inc == 0 {
		return Current, nil
	}
	if t.incarnations == nil {
		t.incarnations = map[election.NodeID]uint64{}
	}
	was, known := t.incarnations[node]
	switch {
	case known && inc < was:
		return Stale, nil
	case known && inc == was:
		return Current, nil
	}
	t.incarnations[node] = inc
	if !known {
		return Current, nil
	}
	return Restarted, t.Forget(node)
}

// Set records that node stands in election as s, and says whether the node
// is new to that election (its state machine must hear of it) or its
// priority changed (it ranks elsewhere now).
func (t *Table) Set(name string, node election.NodeID, s Stand) (joined, reranked bool) {
	if t.stands == nil {
		t.stands = map[string]stands{}
	}
	ss := t.stands[name]
	i, had := ss.index(node)
	if had {
		old := ss[i].Stand
		ss[i].Stand = s
		t.resum(node, name, &old, &s)
		return false, old.Priority != s.Priority
	}
	t.stands[name] = slices.Insert(ss, i, stand{node: node, Stand: s})
	t.resum(node, name, nil, &s)
	return true, false
}

// Withdraw forgets node's candidacy in election and says whether it had one.
func (t *Table) Withdraw(name string, node election.NodeID) bool {
	return t.remove(name, node)
}

// remove drops node's candidacy in election name and reports whether it
// had one; an election left with none goes.
func (t *Table) remove(name string, node election.NodeID) bool {
	ss := t.stands[name]
	i, ok := ss.index(node)
	if !ok {
		return false
	}
	t.resum(node, name, &ss[i].Stand, nil)
	if ss = slices.Delete(ss, i, i+1); len(ss) == 0 {
		delete(t.stands, name)
	} else {
		t.stands[name] = ss
	}
	return true
}

// Forget drops every candidacy of node (gossip says it is gone) and
// returns the elections it stood in, sorted.
func (t *Table) Forget(node election.NodeID) []string {
	var names []string
	for name := range t.stands {
		if t.remove(name, node) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Get is node's candidacy in election.
func (t *Table) Get(name string, node election.NodeID) (Stand, bool) {
	ss := t.stands[name]
	if i, ok := ss.index(node); ok {
		return ss[i].Stand, true
	}
	return Stand{}, false
}

// Members are the nodes standing in election, as state machine members
// (their priority is their candidacy's), sorted by id.
func (t *Table) Members(name string) []election.Member {
	ss := t.stands[name]
	out := make([]election.Member, 0, len(ss))
	for _, s := range ss {
		out = append(out, election.Member{ID: s.node, Priority: s.Priority})
	}
	slices.SortFunc(out, func(a, b election.Member) int { return a.Rank().Compare(b.Rank()) })
	return out
}

// Leader is the leader an observer shows: of the nodes that say they lead
// election, the one at the highest term (terms have one owner each, so
// there is no tie), or ok false when none says so.
func (t *Table) Leader(name string) (node election.NodeID, s Stand, ok bool) {
	for _, st := range t.stands[name] {
		if st.LeaderTerm != 0 && (!ok || st.LeaderTerm > s.LeaderTerm) {
			node, s, ok = st.node, st.Stand, true
		}
	}
	return node, s, ok
}

// Empty: no other node stands in any election, as far as this node knows.
func (t *Table) Empty() bool { return len(t.stands) == 0 }

// Elections lists the elections in which some other node stands, sorted.
func (t *Table) Elections() []string { return slices.Sorted(maps.Keys(t.stands)) }
