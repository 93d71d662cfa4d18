package election

import "fmt"

// Campaign implements StateMachine.
func (c *core) Campaign() {
	if (c.role == RoleLeader && !c.excluded()) || c.withdrawn {
		return // a node that does not stand leaves elections to the others
	}
	c.algo.Campaign(c.host())
}

// exclude keeps this node out of elections for a few rounds, or until a
// leader is settled.
func (c *core) exclude() {
	c.excludeEnd = c.now + uint64(3*(c.cfg.ElectionTimeoutTicks+c.cfg.LeaderTimeoutTicks))
}

// Resign implements StateMachine.
func (c *core) Resign() error {
	if c.role != RoleLeader {
		return ErrNotLeader
	}
	if len(c.members) == 0 {
		return ErrNoCandidate
	}
	if to, ok := c.resignTarget(); ok {
		return c.Transfer(to) // to a member of its support (plain_mode.go)
	}
	c.exclude()
	if c.q == nil {
		c.carry(c.support()) // its successor's (plain_mode.go)
	}
	c.noLeader(0)
	if c.q != nil {
		c.stepDown() // free the followers of their promises
	}
	c.algo.Campaign(c.host())
	return nil
}

// Transfer implements StateMachine.
func (c *core) Transfer(to NodeID) error {
	if c.role != RoleLeader {
		return ErrNotLeader
	}
	if to == c.cfg.ID {
		return nil
	}
	if !c.members.live(to) {
		return fmt.Errorf("%w: %d is not a live member", ErrUnknownNode, to)
	}
	if c.members.saysNotStanding(to) {
		return fmt.Errorf("%w: node %d said it does not stand (its candidate probe fails)", ErrNotStanding, to)
	}
	t := c.leaderTerm
	if c.q == nil {
		c.carry(c.support()) // its successor's (plain_mode.go)
	}
	c.exclude()
	c.noLeader(0)
	c.handingEnd = c.now + uint64(c.cfg.LeaderTimeoutTicks)
	if c.q != nil {
		c.stepDown() // free the followers of their promises
	}
	c.send(Message{Type: MsgTimeoutNow, To: to, Term: t})
	return nil
}
