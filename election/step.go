package election

import (
	"errors"
	"fmt"
)

// Step implements StateMachine.
func (c *core) Step(m Message) error {
	if err := c.validate(m); err != nil {
		c.rejected++
		switch {
		case errors.Is(err, ErrTermRange):
			c.refusedTerms++
		case errors.Is(err, ErrNotMember), errors.Is(err, ErrNotLeaderMsg):
			c.refusedMembership++
		}
		return err
	}
	switch m.Type {
	case MsgHeartbeat:
		c.stepHeartbeat(m)
	case MsgHeartbeatResp:
		c.stepHeartbeatResp(m)
	case MsgCoordinator:
		if c.q != nil {
			c.stepCoordinatorQuorum(m)
		} else {
			c.stepCoordinatorPlain(m)
		}
	case MsgCoordinatorAck:
		if c.q != nil {
			c.stepAckQuorum(m)
		} else {
			c.stepAckPlain(m)
		}
	case MsgTimeoutNow:
		c.stepTimeoutNow(m)
	case MsgElection, MsgAnswer:
		if c.q != nil && c.refuseRivalElection(m) {
			return nil
		}
		bound := c.bound()
		c.observeTerm(m.Term)
		c.algo.Step(c.host(), m)
		if bound {
			c.doubtLeader(m)
		}
	}
	return nil
}

func (c *core) validate(m Message) error {
	if err := CheckMessage(m, c.cfg.ID); err != nil {
		return err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %v from %d: %s", ErrInvalidMessage, m.Type, m.From, fmt.Sprintf(format, a...))
	}
	if m.From == c.cfg.ID {
		return bad("claims to come from this node")
	}
	if r := c.members.get(m.From); r != nil && m.FromRank != (Rank{}) && m.FromRank != r.Rank() {
		return bad("claims rank %v, membership says %v", m.FromRank, r.Rank())
	}
	if m.Type == MsgCoordinator && (m.Leader == 0 || !m.Term.OwnedBy(m.Leader)) {
		return bad("leader %d does not own term %v", m.Leader, m.Term)
	}
	// Checked against membership, since a claim in a message proves
	// nothing: only live members take part, and only a live member (or this
	// node) can be announced as leader. Rank comes from membership, never
	// from the message.
	if !c.members.live(m.From) {
		return fmt.Errorf("%w: %w", bad("%d is not a live member", m.From), ErrNotMember)
	}
	if m.Type == MsgCoordinator && m.Leader != c.cfg.ID {
		if !c.members.live(m.Leader) {
			return fmt.Errorf("%w: %w", bad("names leader %d, not a live member", m.Leader), ErrNotMember)
		}
	}
	if m.Type == MsgTimeoutNow && (m.From != c.leader || m.Term != c.leaderTerm) && !c.passedOn(m) {
		// Only the leader this node follows may hand it its leadership or
		// ask it to run the election it resigned from (or a member that
		// does not stand, passing that on: passedOn).
		return fmt.Errorf("%w: %w", bad("from %d at %v, but this node follows %d at %v", m.From, m.Term, c.leader, c.leaderTerm), ErrNotLeaderMsg)
	}
	if c.checker != nil && (m.Type == MsgElection || m.Type == MsgAnswer) {
		if reason := c.checker.CheckMessage(c.host(), m); reason != "" {
			return bad("%s", reason)
		}
	}
	return nil
}

func (c *core) stepHeartbeat(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm && m.Leader == c.cfg.ID {
		c.heard(m.From)
		c.saysStanding(m)
		resp := Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID}
		if c.q != nil {
			// The heartbeat renews the follower's support for the lease,
			// and the answer asks for its promise again.
			resp.Stamp = c.q.renew(m.From, m.Stamp, c.leaseFrom, c.now)
		}
		c.send(resp)
		return
	}
	if c.now < c.handingEnd && m.Leader == c.cfg.ID && m.Term == c.leaderTerm {
		// This node handed its leadership over moments ago and the target's
		// announcement is on its way. A rejection would make the follower
		// campaign against the target, so for one leader timeout the old
		// term is still acknowledged. If the transfer fails, followers
		// campaign one leader timeout later than they would have.
		c.send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID})
		return
	}
	// Not the leader the sender thinks: tell it what this node knows.
	c.send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.leader, Reject: true})
}

func (c *core) stepHeartbeatResp(m Message) {
	if m.Release {
		// A leader that stepped down frees this node of its promise (in
		// quorum mode; in plain mode no node promises anything).
		if c.q != nil {
			c.releasedBy(m.From)
		}
		return
	}
	if c.q != nil && c.stepHeartbeatRespQuorum(m) {
		return
	}
	if c.q == nil && c.rivalNamed(m) {
		return
	}
	newer := m.Leader != 0 && m.Leader != c.cfg.ID && m.Term > c.leaderTerm && m.Term.OwnedBy(m.Leader)
	// The leader itself, asked, says it still leads the term this node last
	// knew (its answer to the query of a restarted or rejoining node, or its
	// refusal of that node's proposal): the same leadership, at the same
	// term. A plain acknowledgement does not count: one still in flight
	// from a leader that has since died would undo the campaign.
	current := m.Reject && m.From == m.Leader && m.Term == c.leaderTerm && m.Term.OwnedBy(m.Leader) &&
		(c.role == RoleNoLeader || c.role == RoleElecting)
	switch {
	case newer || current:
		// A newer leadership, heard second-hand, or the leader's own word;
		// heartbeats will verify it. Second-hand (a restarted or rejoining
		// node's query answered by another member), the first one goes now:
		// this node may have no connection to that leader yet, and would
		// not notice its crash for a heartbeat interval, meanwhile sending
		// lower nodes' elections back to it (bully).
		c.observeTerm(m.Term)
		c.follow(m.Leader, m.Term)
		if m.From == m.Leader {
			c.leaderSupport = c.claimed(m)
		} else {
			c.askLeader()
		}
	case c.role == RoleLeader && m.Reject && m.Term > c.leaderTerm:
		// Someone saw a newer leadership whose leader it no longer knows:
		// lead on above it rather than be refused forever (see reassert).
		c.observeTerm(m.Term)
		c.reassert()
	case c.role != RoleFollower || m.From != c.leader:
		// Late or unsolicited: nothing to do.
	case m.Leader == c.leader && m.Term == c.leaderTerm:
		c.sinceAck, c.acked = 0, true
		if m.Support != 0 {
			c.leaderSupport = c.claimed(m)
		}
		if c.held != nil && c.now > c.heldAt {
			// The leader answered after this node held a rival's
			// announcement: it is alive, and the rival stays refused.
			c.held = nil
		}
	case m.Term < c.leaderTerm:
		// The leader has not yet heard of its own newer term (a ring
		// Coordinator still on its way, or lost), or this answers an older
		// heartbeat: not a denial. If it stays behind for half a timeout,
		// hand it the announcement directly.
		if c.sinceAck > c.cfg.LeaderTimeoutTicks/2 {
			c.send(Message{Type: MsgCoordinator, To: c.leader, Term: c.leaderTerm, Leader: c.leader, Confirmed: true})
		}
	default:
		// Our leader knows our term and says it does not lead it.
		c.suspect(0)
	}
}

// rivalNamed handles, in plain mode, a heartbeat answer or refusal that
// names another leadership than this node's, at another term, and reports
// whether it did: a leader compares supports (first-hand) or asks the rival
// (second-hand), and a bound follower does not follow a rival with less
// support than its leader's on another member's word (see plain_mode.go).
func (c *core) rivalNamed(m Message) bool {
	if !m.Reject || m.Leader == 0 || m.Leader == c.cfg.ID || m.Term == c.leaderTerm || !m.Term.OwnedBy(m.Leader) {
		return false
	}
	switch {
	case c.role == RoleLeader && m.From == m.Leader:
		return c.leaderMeetsRival(m)
	case c.role == RoleLeader && !(m.Term > c.leaderTerm && c.rivalWins(m, c.support(), c.leaderTerm)):
		return c.leaderHearsOfRival(m)
	case m.Term > c.leaderTerm && m.From != c.leader && c.bound() && !c.rivalWins(m, c.leaderSupport, c.leaderTerm):
		c.observeTerm(m.Term)
		c.askLeader()
		return true
	case m.Term > c.leaderTerm && c.handingOver() && !c.rivalWins(m, c.carried, c.leaderTerm):
		c.observeTerm(m.Term)
		return true
	}
	return false
}

// stepCoordinatorPlain handles an announcement in plain mode: a newer
// leadership is followed at once, whoever passed it on.
func (c *core) stepCoordinatorPlain(m Message) {
	// A term has one owner, so an announcement at our own leader term is the
	// same leadership: take it again even after we lost sight of the leader.
	same := m.Term == c.leaderTerm && m.Leader == c.leader
	accepted := c.acceptsCoordinator(m, same)
	switch {
	case !accepted:
		if m.From != m.Leader || !c.leaderMeetsRival(m) {
			c.refuseStaleCoordinator(m)
		}
	case c.meetsRival(m):
		accepted = false
	case m.Leader == c.cfg.ID:
		// A ring announcement that names this node. Only a newer term makes
		// it lead (selfTermIsNew): a late copy of a term it already led and
		// gave up (resign or transfer) must not bring it back. A round started
		// by a leader that resigned hands its support on (see plain_mode.go).
		if c.selfTermIsNew(m.Term) && !c.excluded() {
			if s := c.claimed(m); s > 1 {
				c.carry(s)
			}
			c.becomeLeader(m.Term)
		}
	case same && c.role == RoleFollower:
		c.sinceAck = 0
		if m.From == c.leader {
			s := c.claimed(m)
			c.answerUncounted(s)
			c.leaderSupport = s
		}
	default:
		c.follow(m.Leader, m.Term)
		c.leaderSupport = c.claimed(m)
	}
	if c.observer != nil {
		c.observer.Coordinated(c.host(), m, accepted)
	}
}

// meetsRival handles, in plain mode, an announcement of another leadership
// than this node's: refused as stale, held by a bound follower, or compared
// by a leader (see plain_mode.go). It reports whether the announcement was
// dealt with so, and is not to be followed.
func (c *core) meetsRival(m Message) bool {
	if m.Term <= c.leaderTerm || (m.Leader == c.leader && c.role == RoleFollower) {
		return false // this leadership, or its leader's reassertion
	}
	switch {
	case c.bound() && !c.rivalWins(m, c.leaderSupport, c.leaderTerm):
		c.holdRival(m)
	case c.handingOver() && !c.rivalWins(m, c.carried, c.leaderTerm):
		c.observeTerm(m.Term)
	case m.From == m.Leader:
		return c.leaderMeetsRival(m)
	case c.role == RoleLeader && !c.rivalWins(m, c.support(), c.leaderTerm):
		return c.leaderHearsOfRival(m)
	default:
		return false
	}
	return true
}

// acceptsCoordinator reports whether an announcement is taken: its term is
// at least this node's leader term, unless this node, with Preempt, is
// deposing that leadership (a lower-ranked leader) on purpose.
func (c *core) acceptsCoordinator(m Message, same bool) bool {
	accepted := m.Term >= c.leaderTerm
	if accepted && !same && m.Term == c.leaderTerm && c.role == RoleElecting && c.cfg.Preempt {
		if lr, ok := c.rankOf(m.Leader); ok && lr.Less(c.self()) {
			accepted = false // we are deposing that leadership on purpose
		}
	}
	return accepted
}

// refuseStaleCoordinator tells the leader of a stale announcement of the
// newer term. It follows the newer leader, or, if that one is gone,
// re-announces itself above it.
func (c *core) refuseStaleCoordinator(m Message) {
	if m.Leader != c.cfg.ID && !(m.Term == c.leaderTerm && c.role == RoleElecting) {
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
	}
}

// stepAckPlain: in plain mode no one proposes, so an acknowledgement only
// shows that a member of this leadership is alive.
func (c *core) stepAckPlain(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm {
		c.heard(m.From)
	}
}

func (c *core) stepTimeoutNow(m Message) {
	if m.Term < c.leaderTerm {
		return // from a leadership already superseded
	}
	c.observeTerm(m.Term)
	if c.q != nil {
		c.q.release(m.From) // it handed over: it claims nothing any more
	} else {
		c.carry(c.claimed(m)) // and its support with it (plain_mode.go)
	}
	c.saysStanding(m)
	if c.withdrawn {
		c.passOn(m)
		return
	}
	if m.Elect {
		// The sender resigned: it will not answer, so leave it out.
		c.excludeEnd, c.resigned = 0, m.From
		c.Campaign()
		return
	}
	c.win(NextTerm(c.term, c.cfg.ID))
}
