package election

import (
	"cmp"
	"slices"
)

// peer is one live member as a state machine knows it, with what the
// machine keeps of it: when it was last heard (as a leader) and whether it
// last said it does not stand.
type peer struct {
	Member
	// heardAt: the tick this node, leading, last heard the member (a
	// heartbeat, an ack); meaningful when heard. Cleared when this node
	// starts a leadership (becomeLeader).
	heardAt uint64
	heard   bool
	// quietHeard: heardAt was recorded while the host vouched for the
	// member, and it has vouched for it since (election/quiet.go).
	quietHeard bool
	// notStanding: the member last said it does not stand (a Heartbeat or
	// a TimeoutNow with NotStanding); preemptTarget skips it.
	notStanding bool
	// owed: leading, this node has not heard the member since its
	// leadership moved to a new term (becomeLeader): each round announces
	// the leadership to it until it speaks at that term (heard).
	owed bool
}

// peers are the live members, this node excluded, sorted by id. A node's
// named elections each run a machine, thousands of them with the same
// handful of members: one small sorted slice per machine costs a fraction
// of the three maps (members, last heard, not standing) it replaces, and a
// lookup is a binary search over the members.
type peers []peer

func (p peers) index(id NodeID) (int, bool) {
	return slices.BinarySearchFunc(p, id, func(e peer, id NodeID) int { return cmp.Compare(e.ID, id) })
}

// get is the live member id, or nil.
func (p peers) get(id NodeID) *peer {
	if i, ok := p.index(id); ok {
		return &p[i]
	}
	return nil
}

// live reports whether id is a live member.
func (p peers) live(id NodeID) bool {
	_, ok := p.index(id)
	return ok
}

// put adds m, or updates the member with m's id (what it keeps of the
// member stays), and returns the member as it was.
func (p *peers) put(m Member) (old Member, known bool) {
	i, ok := p.index(m.ID)
	if ok {
		old, (*p)[i].Member = (*p)[i].Member, m
		return old, true
	}
	*p = slices.Insert(*p, i, peer{Member: m})
	return Member{}, false
}

// remove drops member id, with what was kept of it, and reports whether it
// was live.
func (p *peers) remove(id NodeID) bool {
	i, ok := p.index(id)
	if ok {
		*p = slices.Delete(*p, i, i+1)
	}
	return ok
}

// saysNotStanding reports whether id is a live member that last said it
// does not stand.
func (p peers) saysNotStanding(id NodeID) bool {
	e := p.get(id)
	return e != nil && e.notStanding
}
