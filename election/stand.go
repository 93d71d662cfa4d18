package election

// Stand implements StateMachine: whether this node is a candidate. A node
// that does not stand (withdrawn) stays a member: it follows the leader,
// heartbeats it and answers as a follower, but it never campaigns, never
// wins and never takes a leadership handed to it. It refuses Elections
// (Status.RefusesElections), so a bully campaign skips it as it skips a
// dead node and a ring lap passes it by, at once rather than after an
// answer wait. The instance loop decides when (a failing health probe);
// the machine only keeps the rule.
func (c *core) Stand(on bool) {
	if c.withdrawn == !on {
		return
	}
	c.withdrawn = !on
	if on {
		// Sticky: a node that stands again follows the sitting leader; with
		// no leader it campaigns after its usual wait (tickNoLeader).
		return
	}
	switch c.role {
	case RoleLeader:
		// Hand over as a resign does: to the best-ranked member of its
		// support in one TimeoutNow, or by an election run without it.
		if err := c.Resign(); err == nil {
			return
		}
		// No other live member: it stops leading all the same, and the
		// cluster has no leader until a node that stands joins.
		c.noLeader(0)
		if c.q != nil {
			c.stepDown()
		}
	case RoleElecting:
		// Drop its own attempt, so a round that comes back with its name
		// does not make it lead.
		c.algo.Reset()
		c.noLeader(0)
	}
}

// passOn hands on a leadership offered to a node that does not stand, with
// a TimeoutNow that says so (NotStanding), so its receiver learns it and a
// preempting leader does not offer it again. m is the offer:
//   - a transfer (a preempting leader, an operator's transfer, a resign
//     that picked this node): back to the sender, which leads on at once at
//     a new term; bouncing it to a third node instead could come back here
//     from a preempting leader that has not heard of this node's standing;
//   - an election (a bully resign: Elect): to the best-ranked member other
//     than the sender, which resigned, and than those that do not stand.
func (c *core) passOn(m Message) {
	c.noLeader(0)
	if !m.Elect {
		c.send(Message{Type: MsgTimeoutNow, To: m.From, Term: m.Term})
		return
	}
	c.resigned = m.From
	ring := c.ringView()
	for i := len(ring) - 1; i >= 0; i-- {
		if id := ring[i].ID; id != c.cfg.ID && id != m.From && !c.members.saysNotStanding(id) {
			c.send(Message{Type: MsgTimeoutNow, To: id, Term: m.Term, Elect: true})
			return
		}
	}
}

// passedOn reports whether a TimeoutNow from another node than the leader
// is a leadership passed on by a member that does not stand (passOn), at
// the term it was offered at, which this node believes in: an election to
// run (the leader resigned), or, if this node handed that very leadership
// over moments ago, the leadership back.
func (c *core) passedOn(m Message) bool {
	return m.NotStanding && m.Term == c.leaderTerm &&
		(m.Elect || (c.role != RoleLeader && c.leader == 0 && c.now < c.handingEnd))
}

// saysStanding records whether m's sender stands, as its Heartbeat or
// TimeoutNow says.
func (c *core) saysStanding(m Message) {
	if p := c.members.get(m.From); p != nil {
		p.notStanding = m.NotStanding
	}
}

// preemptTarget is the member a leader with Preempt hands over to: the
// highest-ranked live member (this node if none outranks it), leaving out
// the members that said they do not stand. A member that does not stand
// would pass the leadership on, and the next leader would hand it back to
// it again and again; one that stands again says so in its next
// heartbeat, and the leader hands over to it then.
func (c *core) preemptTarget() NodeID {
	ring := c.ringView()
	for i := len(ring) - 1; i >= 0; i-- {
		if id := ring[i].ID; !c.members.saysNotStanding(id) {
			return id
		}
	}
	return c.cfg.ID
}
