package election

import "fmt"

func (c *core) send(m Message) {
	if !c.usable(m.Term) || !c.usable(m.MaxTerm) {
		return // the term space is exhausted; see usable
	}
	m.From = c.cfg.ID
	c.stampSupport(&m)
	if c.withdrawn && (m.Type == MsgHeartbeat || m.Type == MsgTimeoutNow) {
		m.NotStanding = true // so that a preempting leader does not hand over to it (stand.go)
	}
	if c.q != nil && m.Type == MsgCoordinator && m.Confirmed && m.Leader == c.cfg.ID && c.role == RoleLeader {
		// In quorum mode the leader's own announcement asks for a promise,
		// like its heartbeat answers, so a new leadership renews its lease
		// one round trip sooner.
		m.Stamp = c.now + 1
	}
	c.msgs = append(c.msgs, m)
}

// usable reports whether t may be sent, led or followed: its epoch is at
// most MaxEpoch. Peers' terms beyond it are refused when checked; a term
// this node derives beyond it (NextTerm at the end of the term space, 2^40
// epochs) is dropped and counted, and the node takes no part in elections
// any more: it cannot lead, and says so in Status.RefusedTerms.
func (c *core) usable(t Term) bool {
	if t.InRange() {
		return true
	}
	c.refusedTerms++
	return false
}

// observeTerm raises the highest term seen.
func (c *core) observeTerm(t Term) {
	if t > c.term {
		c.term = t
		c.persist = true
	}
}

func (c *core) newAttempt() Term {
	c.observeTerm(NextTerm(c.term, c.cfg.ID))
	if c.role != RoleLeader {
		c.role, c.leader = RoleElecting, 0
	}
	return c.term
}

// selfTermIsNew reports whether an announcement from another node that
// names this node leader at t may make it lead (plain mode) or propose
// (quorum mode): t is above the last leadership it knew and above the term
// it started from. Every term at or below the start term was minted before
// this run (a round this run takes part in carries a term above its own,
// which is at least the start term), so this run never won it; and the
// leadership term it was given may be older than a term it led and gave up
// (a named election whose record was dropped keeps only its term, in the
// floor; the store keeps a term at or above every leadership term, so the
// start term covers it), so the leadership term alone does not keep such a
// term from coming back to it.
func (c *core) selfTermIsNew(t Term) bool { return t > c.leaderTerm && t > c.cfg.Term }

func (c *core) win(t Term) {
	if !c.usable(t) {
		return
	}
	if c.withdrawn {
		c.noLeader(0) // an attempt begun before it withdrew (Stand)
		return
	}
	c.observeTerm(t)
	if c.q != nil {
		c.propose(t) // lead once a majority acknowledged
		return
	}
	c.becomeLeader(t)
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
}

// follow makes this node a follower of leader at term t.
func (c *core) follow(leader NodeID, t Term) {
	if !c.usable(t) {
		return
	}
	if t < c.leaderTerm {
		// Never back to an older leadership than one this node knew (and
		// may have reported): callers only pass newer terms; this guards.
		c.rejected++
		return
	}
	c.observeTerm(t)
	if c.q != nil && (leader != c.leader || t != c.leaderTerm) {
		c.q.lastStamp = 0 // stamps are only good for the leadership that gave them
	}
	if leader != c.leader || t != c.leaderTerm {
		c.leaderSupport = 1 // until the leader says (see plain_mode.go)
	}
	c.leader, c.leaderTerm, c.role = leader, t, RoleFollower
	c.sinceAck, c.hbElapsed, c.quiet, c.acked, c.leaderVouched, c.answeredAt = 0, 0, false, false, false, 0
	c.held = nil
	c.suspectAt = c.cfg.LeaderTimeoutTicks + c.jitter()
	c.settled()
}

// becomeLeader makes this node lead at term t, which it must own.
func (c *core) becomeLeader(t Term) {
	if !c.usable(t) || c.withdrawn {
		return
	}
	if !t.OwnedBy(c.cfg.ID) {
		panic(fmt.Sprintf("election: node %d cannot lead in term %v", c.cfg.ID, t))
	}
	c.observeTerm(t)
	switch {
	case c.role != RoleLeader:
		for i := range c.members {
			c.members[i].heard, c.members[i].owed = false, false
		}
		c.leaseFrom = c.now
		c.supportAt, c.told = 0, 0 // count again (plain_mode.go)
	case t != c.leaderTerm:
		// The same leadership at a new term (a reassertion, a ring round
		// that chose this leader again): what each member said still counts
		// toward the support, but says nothing of whether it heard of the
		// new term, so each round announces to it until it does (owed).
		for i := range c.members {
			c.members[i].owed = true
		}
	}
	if c.q != nil {
		// The members that acknowledged the proposal were heard, and their
		// promises start the lease.
		for id := range c.q.acks {
			if m := c.members.get(id); m != nil {
				m.heardAt, m.heard = c.now, true
			}
		}
		c.q.lead(c.role != RoleLeader, len(c.members))
	}
	c.role, c.leader, c.leaderTerm = RoleLeader, c.cfg.ID, t
	c.excludeEnd = 0
	c.settled()
}

// settled clears election state once a leadership is settled.
func (c *core) settled() {
	c.bootstrapping, c.handingEnd = false, 0
	c.resigned = 0
	if c.q != nil {
		c.q.dropProposal()
	}
	if c.leader != c.cfg.ID {
		c.excludeEnd = 0
	}
	c.algo.Reset()
}

// giveUp makes this node leaderless after a failed round (too few
// candidates, a proposal without a majority, a lost lease): it campaigns
// again after a leader timeout plus jitter, not at once, so a minority does
// not spin through terms.
func (c *core) giveUp() { c.noLeader(c.cfg.LeaderTimeoutTicks + c.jitter()) }

func (c *core) noLeader(wait int) {
	c.role, c.leader = RoleNoLeader, 0
	if c.q != nil {
		c.q.dropProposal()
	}
	c.idle, c.idleWait = 0, wait
}

// broadcast sends m to every other live member, highest rank first. A new
// leader's announcement thus reaches first the nodes that wait least before
// campaigning on their own after a leader's loss (a tick per rank above
// them, after a head start: the bully's SuspicionDelay): while a send costs
// less than a tick, each is announced to before its wait ends, however
// many members there are.
func (c *core) broadcast(m Message) {
	ring := c.ringView()
	for i := len(ring) - 1; i >= 0; i-- {
		if r := ring[i]; r.ID != c.cfg.ID {
			m.To = r.ID
			c.send(m)
		}
	}
}

// reassert has a sitting leader announce itself again at a new term, above
// every term seen: a leader told of a newer term whose leader is gone does
// it, and an algorithm may ask for it (Host.Reassert). A node that
// campaigned or followed at a higher term then follows it, at a term no
// lower than it saw. In quorum mode only a leader whose lease still holds
// does so: it counts a majority now, so no other node can (promises are
// given to one node at a time), and a new term continues the same claim. A
// leader whose lease is gone, or goes at the next tick (the new term's claim
// would end before it was reported), steps down and proposes instead.
func (c *core) reassert() {
	if c.q != nil && c.leaseLapsing() {
		c.stepDown()
		c.propose(NextTerm(c.term, c.cfg.ID))
		return
	}
	t := NextTerm(c.term, c.cfg.ID)
	c.becomeLeader(t)
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
}
