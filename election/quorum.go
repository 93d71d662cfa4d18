package election

import "slices"

// propose (quorum mode) asks every member to acknowledge this node as the
// leader of term t; it leads once a majority did. A node that still keeps a
// promise to another leader does not stand until the promise ends.
func (c *core) propose(t Term) {
	if !c.usable(t) {
		return
	}
	if c.promised() && c.promisedTo != c.cfg.ID {
		c.noLeader(int(c.promiseEnd - c.now))
		return
	}
	c.role, c.leader = RoleElecting, 0
	c.proposal, c.proposalAge, c.proposedAt = t, 0, c.now
	c.acks = map[NodeID]bool{}
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID})
}

// takeStamp (quorum mode): a stamp from the leader this node follows binds
// it by a promise, and is echoed in its next heartbeat.
func (c *core) takeStamp(m Message) {
	if m.Stamp != 0 && m.From == c.leader && c.role == RoleFollower && c.majority() > 1 {
		c.promise(m.From)
		c.lastStamp = m.Stamp
	}
}

// promised reports whether this node still keeps a promise (quorum mode).
func (c *core) promised() bool { return c.now < c.promiseEnd }

// promise (quorum mode) binds this node not to support anyone but to until
// PromiseTicks from now.
func (c *core) promise(to NodeID) {
	c.promisedTo, c.promiseEnd = to, c.now+uint64(c.cfg.PromiseTicks())
}

// release frees this node of its promise to from, which stepped down.
func (c *core) release(from NodeID) {
	if c.promisedTo == from {
		c.promiseEnd = 0
	}
}

// keepsLeader (quorum mode) reports whether this node is bound to the
// leadership it is in: it leads and its lease holds, or it follows a leader
// to which it keeps a promise (that leader's own word reached it within
// PromiseTicks). The leadership counts a majority now, so no rival can
// gather one: like a Raft node "in lease" under check-quorum, such a node
// gives a rival's campaign no help (refuseRival).
func (c *core) keepsLeader() bool {
	if c.majority() <= 1 {
		return false
	}
	switch c.role {
	case RoleLeader:
		return c.now < c.leaseEnd()
	case RoleFollower:
		return c.promised() && c.promisedTo == c.leader
	}
	return false
}

// refuseRival (quorum mode) answers a rival's campaign that reached a node
// bound to its leadership (keepsLeader): an Election at a term above that
// leadership, or a round's announcement passed on by another node. The
// campaign would depose the leader without its word; it is not passed on,
// its term is not taken, and no one steps down. The answer names the
// leadership, as the refusal of a rival's proposal does: a leader sends its
// own announcement, which the campaigner (a follower back from isolation)
// follows at once at the same term; a follower names its leader, which the
// campaigner then asks, and asks that leader too.
func (c *core) refuseRival(to NodeID) {
	if to == 0 || to == c.cfg.ID {
		return
	}
	if c.role == RoleLeader {
		c.send(Message{Type: MsgCoordinator, To: to, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
		return
	}
	c.send(Message{Type: MsgHeartbeatResp, To: to, Term: c.leaderTerm, Leader: c.leader, Reject: true})
	// The campaigner lost that leader, and this node may not have noticed
	// yet: ask it now, not at the next heartbeat (Host.AskLeader).
	c.askLeader()
}

// stepDown (quorum mode) tells every member that this node no longer
// claims leadership, so they need not keep their promises to it.
func (c *core) stepDown() {
	if c.majority() > 1 {
		c.broadcast(Message{Type: MsgHeartbeatResp, Term: c.leaderTerm, Release: true})
	}
}

// hearsay (quorum mode) handles a leadership at term t heard second-hand:
// from a node other than its leader. This node asks the leader itself and
// follows only on its word (its announcement or its answer): a node that
// cannot reach the leader (a bridge, a one-way cut) must not name it, since
// no heartbeat of its own could confirm it, and a minority names no leader.
// A leader or follower of an older leadership stops naming it.
func (c *core) hearsay(leader NodeID, t Term) {
	c.observeTerm(t)
	switch c.role {
	case RoleLeader:
		c.stepDown()
		c.giveUp()
	case RoleFollower:
		c.giveUp()
	}
	c.send(Message{Type: MsgHeartbeat, To: leader, Term: t, Leader: 0})
}

// leaseEnd (quorum mode) is the first tick at which fewer than a majority
// (this node included) can be counted towards the lease.
func (c *core) leaseEnd() uint64 {
	ends := make([]uint64, 0, len(c.support))
	for id, at := range c.support {
		if _, live := c.members[id]; live {
			ends = append(ends, at+uint64(c.cfg.LeaseTicks))
		}
	}
	k := c.majority() - 1 // members needed besides this node
	if k <= 0 {
		return ^uint64(0)
	}
	if len(ends) < k {
		return 0
	}
	slices.Sort(ends)
	return ends[len(ends)-k] // the k-th latest
}
