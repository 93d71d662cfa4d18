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
		c.stepCoordinator(m)
	case MsgCoordinatorAck:
		c.stepAck(m)
	case MsgTimeoutNow:
		c.stepTimeoutNow(m)
	case MsgElection, MsgAnswer:
		if m.Type == MsgElection && m.Term > c.leaderTerm && m.Initiator != c.leader && m.Initiator != c.cfg.ID && c.keepsLeader() {
			c.refuseRival(m.Initiator) // quorum mode: see refuseRival
			return nil
		}
		c.observeTerm(m.Term)
		c.algo.Step(c.host(), m)
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
	if r, ok := c.members[m.From]; ok && m.FromRank != (Rank{}) && m.FromRank != r.Rank() {
		return bad("claims rank %v, membership says %v", m.FromRank, r.Rank())
	}
	if m.Type == MsgCoordinator && (m.Leader == 0 || !m.Term.OwnedBy(m.Leader)) {
		return bad("leader %d does not own term %v", m.Leader, m.Term)
	}
	// Checked against membership (issue 12): only live members take part,
	// and only a live member (or this node) can be announced as leader.
	// Rank comes from membership, never from the message.
	if _, ok := c.members[m.From]; !ok {
		return fmt.Errorf("%w: %w", bad("%d is not a live member", m.From), ErrNotMember)
	}
	if m.Type == MsgCoordinator && m.Leader != c.cfg.ID {
		if _, ok := c.members[m.Leader]; !ok {
			return fmt.Errorf("%w: %w", bad("names leader %d, not a live member", m.Leader), ErrNotMember)
		}
	}
	if m.Type == MsgTimeoutNow && (m.From != c.leader || m.Term != c.leaderTerm) {
		// Only the leader this node follows may hand it its leadership or
		// ask it to run the election it resigned from.
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
		c.lastHeard[m.From] = c.now
		resp := Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID}
		if c.majority() > 1 {
			// The echo of a stamp this leadership gave (never one from the
			// future) dates the follower's promise: count it from then.
			if at := m.Stamp - 1; m.Stamp != 0 && at >= c.leaseFrom && at <= c.now {
				c.support[m.From] = max(c.support[m.From], at)
			}
			resp.Stamp = c.now + 1
		}
		c.send(resp)
		return
	}
	if c.now < c.handingEnd && m.Leader == c.cfg.ID && m.Term == c.leaderTerm {
		// This node handed its leadership over moments ago and the target's
		// announcement is on its way. A rejection would make the follower
		// campaign against the target (found in CI: node 5 took over from a
		// transfer to node 2), so for one leader timeout the old term is
		// still acknowledged. If the transfer fails, followers campaign one
		// leader timeout later than they would have.
		c.send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID})
		return
	}
	// Not the leader the sender thinks: tell it what this node knows.
	c.send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.leader, Reject: true})
}

func (c *core) stepHeartbeatResp(m Message) {
	if m.Release {
		c.release(m.From)
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
	case newer && c.majority() > 1 && m.From != m.Leader && c.role == RoleLeader && c.now < c.leaseEnd():
		// Quorum mode: a leader whose lease holds hears, second-hand, of a
		// leadership at a higher term (a returning node that followed it
		// before this one was elected at a lower term it knew). It counts
		// a majority now, so that leadership is over: lead on above it.
		c.observeTerm(m.Term)
		c.reassert()
	case newer && c.majority() > 1 && m.From != m.Leader:
		c.hearsay(m.Leader, m.Term)
	case newer || current:
		// A newer leadership, heard second-hand, or the leader's own word;
		// heartbeats will verify it. Second-hand (a restarted or rejoining
		// node's query answered by another member), the first one goes now:
		// this node may have no connection to that leader yet, and would
		// not notice its crash for a heartbeat interval, meanwhile sending
		// lower nodes' elections back to it (bully).
		c.observeTerm(m.Term)
		c.follow(m.Leader, m.Term)
		if m.From != m.Leader {
			c.askLeader()
		}
	case m.Reject && c.majority() > 1 && m.Leader != 0 && m.Leader != m.From && m.Leader != c.cfg.ID &&
		m.Term == c.leaderTerm && m.Term.OwnedBy(m.Leader) && (c.role == RoleNoLeader || c.role == RoleElecting):
		// Quorum mode: a member still bound to the leadership this node
		// last knew refused its campaign (see refuseRival). Ask that leader
		// itself: its answer is the word this node follows it on.
		c.send(Message{Type: MsgHeartbeat, To: m.Leader, Term: m.Term, Leader: 0})
	case c.role == RoleLeader && m.Reject && m.Term > c.leaderTerm:
		// Someone saw a newer leadership whose leader it no longer knows:
		// lead on above it rather than be refused forever (see reassert).
		c.observeTerm(m.Term)
		c.reassert()
	case c.role != RoleFollower || m.From != c.leader:
		// Late or unsolicited: nothing to do.
	case m.Leader == c.leader && m.Term == c.leaderTerm:
		c.sinceAck = 0
		c.takeStamp(m)
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
		c.suspect()
	}
}

func (c *core) stepCoordinator(m Message) {
	// A term has one owner, so an announcement at our own leader term is the
	// same leadership: take it again even after we lost sight of the leader.
	same := m.Term == c.leaderTerm && m.Leader == c.leader
	if m.From != m.Leader && m.Term > c.leaderTerm && c.keepsLeader() {
		// Quorum mode: a round's announcement passed on by another node
		// (a ring Coordinator from a node back from isolation, naming the
		// round's winner, maybe this node) while this node's leadership
		// holds: refuse it, and stop it here (see refuseRival). (A
		// proposal comes from its proposer: one passed on is no better.)
		c.refuseRival(m.From)
		if m.Initiator != m.From {
			c.refuseRival(m.Initiator)
		}
		return
	}
	if c.majority() > 1 && m.Confirmed && m.From != m.Leader && m.Leader != c.cfg.ID && m.Term >= c.leaderTerm {
		// Quorum mode: an announcement passed on by another node (a ring
		// Coordinator on its way round, a bully follower naming its
		// leader). It neither makes this node follow nor keeps it calm.
		if !same || c.role != RoleFollower {
			c.hearsay(m.Leader, m.Term)
		}
		if c.observer != nil {
			c.observer.Coordinated(c.host(), m, true) // a ring passes it on
		}
		return
	}
	accepted := m.Term >= c.leaderTerm
	if accepted && !same && m.Term == c.leaderTerm && c.role == RoleElecting && c.cfg.Preempt {
		if lr, ok := c.rankOf(m.Leader); ok && lr.Less(c.self) {
			accepted = false // we are deposing that leadership on purpose
		}
	}
	switch {
	case !accepted:
		// Stale: tell the stale leader of the newer term. It follows the
		// newer leader, or, if that one is gone, re-announces itself above it.
		if m.Leader != c.cfg.ID && !(m.Term == c.leaderTerm && c.role == RoleElecting) {
			c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
		}
	case m.Leader == c.cfg.ID:
		// A ring announcement that names this node. Only a newer term makes
		// it lead: a late copy of a term it already led and gave up (resign,
		// transfer, lost lease) must not bring it back.
		// (Quorum mode: a round that names this node while its lease
		// holds was refused above, with its own announcement at its own
		// term; it once reasserted above the round's term.)
		if m.Term > c.leaderTerm && !c.excluded() && c.proposal != m.Term {
			if c.majority() > 1 {
				c.propose(m.Term) // quorum mode: lead once a majority acknowledged
			} else {
				c.becomeLeader(m.Term)
			}
		}
		if c.majority() > 1 {
			// Quorum mode: the ring's token ends here. Passed on, it would
			// reach the next node from this one, naming this one, as if it
			// were this node's own announcement: it has only proposed.
			return
		}
	case c.majority() > 1 && !m.Confirmed && c.role == RoleLeader:
		// Quorum mode: a rival's proposal reaches the sitting leader, whose
		// lease still holds (it steps down the tick the lease ends), so the
		// rival cannot gather a majority. Refuse, and name this leadership:
		// a follower that lost sight of it (an isolated node back, a paused
		// one resumed) follows it again at the same term (Raft's check-quorum).
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.cfg.ID, Reject: true})
		return
	case c.majority() > 1 && !m.Confirmed && c.promised() && c.promisedTo != m.Leader:
		// Quorum mode: this node promised another node its support, which
		// may still count it towards a lease. Refuse, and say whom it follows.
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
		return
	case c.majority() > 1 && !m.Confirmed:
		// Quorum mode: acknowledge, and wait for the confirmation.
		// Like a voter, hold off campaigning while the proposer collects acks.
		c.promise(m.Leader)
		c.observeTerm(m.Term)
		c.algo.Reset()
		c.noLeader(c.cfg.ElectionTimeoutTicks + c.jitter())
		c.tentative, c.tentativeFor = m.Leader, m.Term
		c.send(Message{Type: MsgCoordinatorAck, To: m.Leader, Term: m.Term})
	case same && c.role == RoleFollower:
		c.sinceAck = 0
		c.takeStamp(m)
	default:
		c.follow(m.Leader, m.Term)
		c.takeStamp(m)
	}
	if c.observer != nil {
		c.observer.Coordinated(c.host(), m, accepted)
	}
}

func (c *core) stepAck(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm {
		c.lastHeard[m.From] = c.now
		// A late ack of the proposal that made this leadership.
		c.support[m.From] = max(c.support[m.From], c.proposedAt)
		return
	}
	if c.proposal == 0 || m.Term != c.proposal {
		return
	}
	c.acks[m.From] = true
	if len(c.acks)+1 >= c.majority() {
		t := c.proposal
		c.becomeLeader(t)
		if c.now+1 >= c.leaseEnd() {
			// The majority came too late: each ack counts from when the
			// proposal went out (and only while its sender is a live
			// member), so the lease they make has run out, or does at the
			// next tick. Leading now would end before it was even reported,
			// after followers were told:
			// give up instead, unannounced, and free them of their promises.
			c.stepDown()
			c.giveUp()
			return
		}
		c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
	}
}

func (c *core) stepTimeoutNow(m Message) {
	if m.Term < c.leaderTerm {
		return // from a leadership already superseded
	}
	c.observeTerm(m.Term)
	c.release(m.From) // it handed over: it claims nothing any more
	if m.Elect {
		// The sender resigned: it will not answer, so leave it out.
		c.excludeEnd, c.resigned = 0, m.From
		c.Campaign()
		return
	}
	c.win(NextTerm(c.term, c.cfg.ID))
}
