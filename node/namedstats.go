package node

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// What readers outside the loop (the status page, metrics, the API's
// listings) learn of the named elections: counts, tallies per node and
// pages of them by name, read from what the loop published (publishNamed),
// so none walks the loop's state nor costs more than one pass over the
// published map, however many elections there are.

// NamedCounts is the named elections as this node sees them, counted.
type NamedCounts struct {
	// Elections this node knows (it stands, watches, or a peer stands).
	Elections int
	// Led: those whose leader is this node (it stands for the leading app).
	Led int
	// Standing: those this node stands in (an app of its heads its queue).
	Standing int
	// Leaderless: those with no leader known to this node.
	Leaderless int
	// Candidacies: apps campaigning through this node, queued ones
	// included.
	Candidacies int
	// LeaderChanges: changes of an election's shown leadership (a new
	// leader, a new token, or no leader any more) since the node started.
	LeaderChanges uint64
}

// NamedCounts counts the named elections (one pass, under the read lock).
func (n *Node) NamedCounts() NamedCounts {
	c := NamedCounts{LeaderChanges: n.counters.NamedLeaderChanges.Load()}
	self := n.cfg.Self.ID
	n.mu.RLock()
	defer n.mu.RUnlock()
	c.Elections = len(n.elections)
	for _, e := range n.elections {
		switch {
		case e.Leader.Self:
			c.Led++
		case e.Leader.ID == 0:
			c.Leaderless++
		}
		if slices.Contains(e.CandidateIDs, self) {
			c.Standing++
		}
		c.Candidacies += e.Local
	}
	return c
}

// NodeTally is what one node holds of the named elections, as this node
// sees them.
type NodeTally struct {
	ID election.NodeID `json:"id"`
	// Leads: the elections whose leader is this node.
	Leads int `json:"leads"`
	// Stands: the elections this node stands in (its candidacies, one per
	// election however many apps queue on it).
	Stands int `json:"stands"`
}

// NamedByNode tallies, per node, the named elections it leads and those it
// stands in, by id; a node that does neither is not listed. One pass over
// the elections (a few candidates each): its size is the cluster's, not the
// elections', so it suits a page or a scrape at any count of elections.
func (n *Node) NamedByNode() []NodeTally {
	by := map[election.NodeID]*NodeTally{}
	tally := func(id election.NodeID) *NodeTally {
		t := by[id]
		if t == nil {
			t = &NodeTally{ID: id}
			by[id] = t
		}
		return t
	}
	n.mu.RLock()
	for _, e := range n.elections {
		if e.Leader.ID != 0 {
			tally(e.Leader.ID).Leads++
		}
		for _, id := range e.CandidateIDs {
			tally(id).Stands++
		}
	}
	n.mu.RUnlock()
	out := make([]NodeTally, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b NodeTally) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ElectionQuery selects and pages named elections, by name.
type ElectionQuery struct {
	// After: only names that sort after it; "" from the first. The Next
	// of a page is the After of the page that follows.
	After string
	// Limit: at most this many, 1 to named.PageMax; 0 is
	// named.PageDefault.
	Limit int
	// Prefix: only names that start with it.
	Prefix string
	// Leader: only elections led by this node (0: any).
	Leader election.NodeID
	// Leaderless: only elections with no leader known to this node.
	Leaderless bool
}

// Check says what is wrong with q, naming the field.
func (q ElectionQuery) Check() error {
	if q.After != "" {
		if err := named.CheckName(q.After); err != nil {
			return fmt.Errorf("after: %w", err)
		}
	}
	if q.Prefix != "" {
		// A prefix is a name's start, so the name rule applies to it.
		if err := named.CheckName(q.Prefix); err != nil {
			return fmt.Errorf("prefix: %w", err)
		}
	}
	if q.Limit < 0 || q.Limit > named.PageMax {
		return fmt.Errorf("limit: %d is not within 1 to %d (0: %d)", q.Limit, named.PageMax, named.PageDefault)
	}
	if q.Leader != 0 && q.Leaderless {
		return fmt.Errorf("leader and leaderless: an election cannot have node %d as its leader and none", q.Leader)
	}
	return nil
}

// ElectionQueryFromURL reads a query from URL parameters of the same names
// as its fields (after, limit, prefix, leader, leaderless: every listing
// over HTTP takes them), checked; an error names the parameter.
func ElectionQueryFromURL(v url.Values) (ElectionQuery, error) {
	q := ElectionQuery{After: v.Get("after"), Prefix: v.Get("prefix")}
	if s := v.Get("limit"); s != "" {
		l, err := strconv.Atoi(s)
		if err != nil {
			return q, fmt.Errorf("limit: %q is not a number", s)
		}
		if l < 1 { // given, so not the default: say so
			return q, fmt.Errorf("limit: %d is not within 1 to %d", l, named.PageMax)
		}
		q.Limit = l
	}
	if s := v.Get("leader"); s != "" {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil || id == 0 {
			return q, fmt.Errorf("leader: %q is not a node id (a positive integer)", s)
		}
		q.Leader = election.NodeID(id)
	}
	if s := v.Get("leaderless"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("leaderless: %q is not true or false", s)
		}
		q.Leaderless = b
	}
	return q, q.Check()
}

// match reports whether e passes q's filters (not its paging).
func (q ElectionQuery) match(e *ElectionInfo) bool {
	return strings.HasPrefix(e.Election, q.Prefix) &&
		(q.Leader == 0 || e.Leader.ID == q.Leader) &&
		(!q.Leaderless || e.Leader.ID == 0)
}

// ElectionsPage is one page of a listing.
type ElectionsPage struct {
	// Elections are the page's, by name.
	Elections []ElectionInfo `json:"elections"`
	// Matched: the elections that pass the query's filters, on every page.
	Matched int `json:"matched"`
	// Total: every named election this node knows.
	Total int `json:"total"`
	// Next, when more match after this page, is the After of the next one
	// (the last name of this one).
	Next string `json:"next,omitempty"`
}

// ListElections answers q (checked first): one pass over the elections,
// keeping only the page's names sorted as it goes, so a page of 100 of
// 10,000 elections does not sort the 10,000.
func (n *Node) ListElections(q ElectionQuery) (ElectionsPage, error) {
	if err := q.Check(); err != nil {
		return ElectionsPage{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = named.PageDefault
	}
	keep := limit + 1 // one more than the page: does a next page start?
	n.mu.RLock()
	defer n.mu.RUnlock()
	p := ElectionsPage{Total: len(n.elections)}
	names := make([]string, 0, min(len(n.elections), keep))
	for name, e := range n.elections {
		if !q.match(&e) {
			continue
		}
		p.Matched++
		if name <= q.After || (len(names) == keep && name >= names[keep-1]) {
			continue
		}
		i, _ := slices.BinarySearch(names, name)
		if len(names) == keep {
			names = names[:keep-1] // the last falls off the page
		}
		names = slices.Insert(names, i, name)
	}
	if len(names) > limit {
		names = names[:limit]
		p.Next = names[limit-1]
	}
	p.Elections = make([]ElectionInfo, len(names))
	for i, name := range names {
		p.Elections[i] = n.elections[name]
	}
	return p, nil
}

// NamedElectionsPage lists at most limit named elections whose names sort
// after after ("" from the first), by name, and how many elections this
// node knows in all; limit 0 lists none.
func (n *Node) NamedElectionsPage(after string, limit int) (page []ElectionInfo, total int) {
	if limit <= 0 {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return nil, len(n.elections)
	}
	// Up to named.PageMax a page at a time; a caller asking more (a
	// test) gets the pages joined.
	for {
		p, err := n.ListElections(ElectionQuery{After: after, Limit: min(limit-len(page), named.PageMax)})
		if err != nil {
			return page, p.Total
		}
		page, total = append(page, p.Elections...), p.Total
		if p.Next == "" || len(page) == limit {
			return page, total
		}
		after = p.Next
	}
}

// candidateIDs are the nodes standing in an election: others, and this
// node (self) if it stands.
func candidateIDs(others []election.Member, stands bool, self election.NodeID) []election.NodeID {
	ids := make([]election.NodeID, 0, len(others)+1)
	for _, m := range others {
		ids = append(ids, m.ID)
	}
	if stands {
		ids = append(ids, self)
	}
	return ids
}

// NamedObserver is an Observer that is also told of named elections'
// failovers (found by type assertion, so an Observer without it still
// serves).
type NamedObserver interface {
	// NamedFailover: a named election has a new leadership after an
	// earlier one; d is how long this node showed no leader between them
	// (0 when it went from one straight to the next).
	NamedFailover(d time.Duration)
}

// noteNamed accounts for a change of what this node shows of an election,
// from old (zero for an election not known before) to *new (known false:
// the election is no longer known): it counts a change of the shown
// leadership, and times a failover: from when the node stopped showing a
// leader to when it shows the next, carried in new.leaderless meanwhile.
// Showing the same leadership again (one term has one leader) after a
// while without it is no failover: a node that starts standing in an
// election it observed shows no leader until the leader's first word to its
// new machine. Called by the loop, under mu.
func (n *Node) noteNamed(old ElectionInfo, new *ElectionInfo, known bool) {
	var li LeaderInfo
	if known {
		li = new.Leader
	}
	n.noteNamedLeader(old.Leader, li)
	if !known {
		return
	}
	switch had, has := old.Leader.ID != 0, li.ID != 0; {
	case had && !has:
		new.leaderless, new.lostTerm = time.Now(), old.Leader.Term
	case !had && !has:
		new.leaderless, new.lostTerm = old.leaderless, old.lostTerm
	case has && (had && (old.Leader.ID != li.ID || old.Leader.Term != li.Term) || !old.leaderless.IsZero() && old.lostTerm != li.Term):
		var d time.Duration
		if !had {
			d = time.Since(old.leaderless)
		}
		if o, ok := n.observer().(NamedObserver); ok {
			o.NamedFailover(d)
		}
	}
}

// noteNamedLeader counts a change of an election's shown leadership, from
// old to new (zero values for an election not known before or no longer
// known). An election without a leader before and after is no change.
func (n *Node) noteNamedLeader(old, new LeaderInfo) {
	if (old.ID != 0 || new.ID != 0) && (old.ID != new.ID || old.Term != new.Term) {
		n.counters.NamedLeaderChanges.Add(1)
	}
}
