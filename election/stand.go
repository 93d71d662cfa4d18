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

// passOn hands on a leadership offered to a node that does not stand (a
// TimeoutNow: a transfer to it, or a resign that asked it to elect): the
// election runs without this node and without the sender, which gave the
// leadership up.
func (c *core) passOn(from NodeID) {
	c.resigned = from
	c.noLeader(0)
	c.algo.Campaign(c.host())
}
