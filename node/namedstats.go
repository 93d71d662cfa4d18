package node

import "slices"

// What readers outside the loop (the status page, metrics) learn of the
// named elections: counts and a page of them by name, read from what the
// loop published (publishNamed), so neither walks the loop's state nor costs
// more than one pass over the published map, however many elections there
// are.

// NamedCounts is the named elections as this node sees them, counted.
type NamedCounts struct {
	// Elections this node knows (it stands, watches, or a peer stands).
	Elections int
	// Led: those whose leader is this node (it stands for the leading app).
	Led int
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
	n.mu.RLock()
	defer n.mu.RUnlock()
	c.Elections = len(n.elections)
	for _, e := range n.elections {
		if e.Leader.Self {
			c.Led++
		}
		c.Candidacies += e.Local
	}
	return c
}

// NamedElectionsPage lists at most limit named elections whose names sort
// after after ("" from the first), by name, and how many elections this
// node knows in all. It keeps only the page's names sorted as it goes, so
// a page of 100 of 10,000 elections does not sort the 10,000.
func (n *Node) NamedElectionsPage(after string, limit int) (page []ElectionInfo, total int) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	total = len(n.elections)
	limit = max(limit, 0)
	names := make([]string, 0, min(total, limit))
	for name := range n.elections {
		if name <= after || (len(names) == limit && (limit == 0 || name >= names[limit-1])) {
			continue
		}
		i, _ := slices.BinarySearch(names, name)
		if len(names) == limit {
			names = names[:limit-1] // the last falls off the page
		}
		names = slices.Insert(names, i, name)
	}
	page = make([]ElectionInfo, len(names))
	for i, name := range names {
		page[i] = n.elections[name]
	}
	return page, total
}

// noteNamedLeader counts a change of an election's shown leadership, from
// old to new (zero values for an election not known before or no longer
// known). An election without a leader before and after is no change.
func (n *Node) noteNamedLeader(old, new LeaderInfo) {
	if (old.ID != 0 || new.ID != 0) && (old.ID != new.ID || old.Term != new.Term) {
		n.counters.NamedLeaderChanges.Add(1)
	}
}
