package election

// The core's decisions in quorum mode: a winner proposes and leads once a
// majority acknowledged, a leader claims only while its lease holds, and a
// follower bound by a promise gives a rival's campaign no help. Every
// method here runs only when c.q is set.

// propose asks every member to acknowledge this node as the leader of term
// t; it leads once a majority did. A node that still keeps a promise to
// another leader does not stand until the promise ends.
func (c *core) propose(t Term) {
	if !c.usable(t) || c.withdrawn {
		return
	}
	if c.q.promised(c.now) && c.q.promisedTo != c.cfg.ID {
		c.noLeader(int(c.q.promiseEnd - c.now))
		return
	}
	c.role, c.leader = RoleElecting, 0
	c.q.propose(t, c.now)
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID})
}

// adoptQuorum is Host.Adopt in quorum mode. The algorithm's winner has yet
// to gather a majority: this node proposes itself if it won; otherwise (a
// ring round's initiator naming the winner) it waits for the winner's
// proposal, and campaigns again if none comes.
func (c *core) adoptQuorum(leader NodeID, t Term) {
	c.observeTerm(t)
	if leader == c.cfg.ID {
		c.propose(t)
		return
	}
	c.noLeader(c.cfg.ElectionTimeoutTicks + c.jitter())
}

// leaseEnd is the first tick at which this leader can no longer count a
// majority of live members towards its lease.
func (c *core) leaseEnd() uint64 { return c.q.leaseEnd(c.members) }

// leaseLapsing reports whether the lease has run out by the next tick: a
// leadership taken or renewed now would end before it was even reported,
// after followers were told.
func (c *core) leaseLapsing() bool { return c.now+1 >= c.leaseEnd() }

// takeStamp: a stamp from the leader this node follows binds it by a
// promise, and is echoed in its next heartbeat.
func (c *core) takeStamp(m Message) {
	if m.Stamp != 0 && m.From == c.leader && c.role == RoleFollower {
		c.q.promise(m.From, c.now)
		c.q.lastStamp = m.Stamp
	}
}

// keepsLeader reports whether this node is bound to the leadership it is
// in: it leads and its lease holds, or it follows a leader to which it
// keeps a promise (that leader's own word reached it within PromiseTicks).
// The leadership counts a majority now, so no rival can gather one: like a
// Raft node "in lease" under check-quorum, such a node gives a rival's
// campaign no help (refuseRival).
func (c *core) keepsLeader() bool {
	switch c.role {
	case RoleLeader:
		return c.now < c.leaseEnd()
	case RoleFollower:
		return c.q.promised(c.now) && c.q.promisedTo == c.leader
	}
	return false
}

// refuseRival answers a rival's campaign that reached a node bound to its
// leadership (keepsLeader): an Election at a term above that leadership, or
// a round's announcement passed on by another node. The campaign would
// depose the leader without its word; it is not passed on, its term is not
// taken, and no one steps down. The answer names the leadership, as the
// refusal of a rival's proposal does: a leader sends its own announcement,
// which the campaigner (a follower back from isolation) follows at once at
// the same term; a follower names its leader, which the campaigner then
// asks, and asks that leader too.
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

// refuseRivalElection refuses an Election that would depose the leadership
// this node is bound to (see refuseRival), and reports whether it did. An
// Election started by that leader, or by this node, is no rival's.
func (c *core) refuseRivalElection(m Message) bool {
	if m.Type != MsgElection || m.Term <= c.leaderTerm || m.Initiator == c.leader || m.Initiator == c.cfg.ID || !c.keepsLeader() {
		return false
	}
	c.refuseRival(m.Initiator)
	return true
}

// stepDown tells every member that this node no longer claims leadership,
// so they need not keep their promises to it.
func (c *core) stepDown() {
	c.broadcast(Message{Type: MsgHeartbeatResp, Term: c.leaderTerm, Release: true})
}

// releasedBy takes from's release (a leader that stepped down or handed
// over frees its followers of their promises): this node is free of its
// promise to from, and a proposal it refused only because of that promise,
// while its proposer may still wait for acknowledgements, is stepped again
// now, as if it had come after the release: checked again as any message
// is (its sender may have gone), then handled as on its arrival. That is
// what a network that delayed the proposal would have done, which the
// protocol allows already. The release is the old leader's own word, so
// nothing is assumed: without it the proposal stays refused, and the
// promise runs out on its own.
func (c *core) releasedBy(from NodeID) {
	if !c.q.release(from) {
		return
	}
	if m, ok := c.q.takeDeferred(from, c.now, c.cfg.ElectionTimeoutTicks); ok && c.validate(m) == nil {
		c.stepCoordinatorQuorum(m)
	}
}

// hearsay handles a leadership at term t heard second-hand: from a node
// other than its leader. This node asks the leader itself and follows only
// on its word (its announcement or its answer): a node that cannot reach
// the leader (a bridge, a one-way cut) must not name it, since no heartbeat
// of its own could confirm it, and a minority names no leader. A leader or
// follower of an older leadership stops naming it.
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

// stepCoordinatorQuorum handles an announcement in quorum mode. A
// Coordinator from its own leader is either a proposal (not Confirmed),
// which a node acknowledges with a promise unless it is bound to another
// leadership, or the confirmation that a majority acknowledged, which it
// follows. One passed on by another node is hearsay.
func (c *core) stepCoordinatorQuorum(m Message) {
	// A term has one owner, so an announcement at our own leader term is the
	// same leadership: take it again even after we lost sight of the leader.
	same := m.Term == c.leaderTerm && m.Leader == c.leader
	if m.From != m.Leader && m.Term > c.leaderTerm && c.keepsLeader() {
		// A round's announcement passed on by another node (a ring
		// Coordinator from a node back from isolation, naming the round's
		// winner, maybe this node) while this node's leadership holds:
		// refuse it, and stop it here (see refuseRival). (A proposal comes
		// from its proposer: one passed on is no better.)
		c.refuseRival(m.From)
		if m.Initiator != m.From {
			c.refuseRival(m.Initiator)
		}
		return
	}
	if m.Confirmed && m.From != m.Leader && m.Leader != c.cfg.ID && m.Term >= c.leaderTerm {
		// An announcement passed on by another node (a ring Coordinator on
		// its way round, a bully follower naming its leader). It neither
		// makes this node follow nor keeps it calm.
		if !same || c.role != RoleFollower {
			c.hearsay(m.Leader, m.Term)
		}
		if c.observer != nil {
			c.observer.Coordinated(c.host(), m, true) // a ring passes it on
		}
		return
	}
	accepted := c.acceptsCoordinator(m, same)
	switch {
	case !accepted:
		c.refuseStaleCoordinator(m)
	case m.Leader == c.cfg.ID:
		// A ring announcement that names this node: only a term new to
		// this run makes it propose (selfTermIsNew, as in plain mode): a
		// term at or below the one it started from was minted before it
		// ran, maybe led by it for an app that has since withdrawn, and
		// its followers, still bound to that leadership, would acknowledge
		// it again. A round that names it while its lease holds was
		// refused above, with its own announcement at its own term.
		if c.selfTermIsNew(m.Term) && !c.excluded() && c.q.proposal != m.Term {
			c.propose(m.Term)
		}
		// The ring's token ends here. Passed on, it would reach the next
		// node from this one, naming this one, as if it were this node's own
		// announcement: it has only proposed.
		return
	case !m.Confirmed && c.role == RoleLeader:
		// A rival's proposal reaches the sitting leader, whose lease still
		// holds (it steps down the tick the lease ends), so the rival cannot
		// gather a majority. Refuse, and name this leadership: a follower
		// that lost sight of it (an isolated node back, a paused one
		// resumed) follows it again at the same term (Raft's check-quorum).
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.cfg.ID, Reject: true})
		return
	case !m.Confirmed && c.q.promised(c.now) && c.q.promisedTo != m.Leader:
		// This node promised another node its support, which may still
		// count it towards a lease. Refuse, and say whom it follows. A
		// leader that hands over releases its followers and sends its
		// TimeoutNow at once, and the successor's proposal, on another
		// link, may come before the release: keep it, and answer it when
		// the release comes (releasedBy).
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
		if m.From == m.Leader {
			c.q.deferProposal(m, c.now)
		}
		return
	case !m.Confirmed:
		// Acknowledge, and wait for the confirmation. Like a voter, hold
		// off campaigning while the proposer collects acks.
		c.q.promise(m.Leader, c.now)
		c.observeTerm(m.Term)
		c.algo.Reset()
		c.noLeader(c.cfg.ElectionTimeoutTicks + c.jitter())
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

// stepHeartbeatRespQuorum handles what quorum mode adds to a heartbeat
// answer, and reports whether that was all: a leadership named by another
// node than its leader is hearsay (followed only on the leader's own word),
// and the leader's answer renews this follower's promise. What it leaves,
// stepHeartbeatResp handles as in plain mode.
func (c *core) stepHeartbeatRespQuorum(m Message) bool {
	secondHand := m.Leader != 0 && m.Leader != c.cfg.ID && m.Leader != m.From && m.Term.OwnedBy(m.Leader)
	switch {
	case secondHand && m.Term > c.leaderTerm && c.role == RoleLeader && c.now < c.leaseEnd():
		// A leader whose lease holds hears, second-hand, of a leadership at
		// a higher term (a returning node that followed it before this one
		// was elected at a lower term it knew). It counts a majority now,
		// so that leadership is over: lead on above it.
		c.observeTerm(m.Term)
		c.reassert()
	case secondHand && m.Term > c.leaderTerm:
		c.hearsay(m.Leader, m.Term)
	case secondHand && m.Reject && m.Term == c.leaderTerm && (c.role == RoleNoLeader || c.role == RoleElecting):
		// A member still bound to the leadership this node last knew
		// refused its campaign (see refuseRival). Ask that leader itself:
		// its answer is the word this node follows it on.
		c.send(Message{Type: MsgHeartbeat, To: m.Leader, Term: m.Term, Leader: 0})
	default:
		if c.role == RoleFollower && m.From == c.leader && m.Leader == c.leader && m.Term == c.leaderTerm {
			// The leader's answer: it renews the promise (the plain
			// handling then restarts the leader timeout).
			c.takeStamp(m)
		}
		return false
	}
	return true
}

// stepAckQuorum takes an acknowledgement of a proposal: this node leads once
// a majority (itself included) acknowledged, and a late one, after it leads,
// still counts towards its lease.
func (c *core) stepAckQuorum(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm {
		if p := c.members.get(m.From); p != nil {
			p.heardAt, p.heard, p.owed = c.now, true, false
		}
		// A late ack of the proposal that made this leadership.
		c.q.count(m.From, c.q.proposedAt)
		return
	}
	if !c.q.ack(m.From, m.Term) {
		return
	}
	t := c.q.proposal
	c.becomeLeader(t)
	if c.leaseLapsing() {
		// The majority came too late: each ack counts from when the
		// proposal went out (and only while its sender is a live member),
		// so the lease they make has run out, or does at the next tick.
		// Give up instead, unannounced, and free the followers of their
		// promises.
		c.stepDown()
		c.giveUp()
		return
	}
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
}

// tickLease runs a leader's lease, after its plain tick: when the lease runs
// out it stops claiming, and with Preempt it hands over to a higher-ranked
// member.
func (c *core) tickLease() {
	if c.now >= c.leaseEnd() {
		// No majority can still be counted. Stop claiming now, before any
		// promise counted can have ended.
		c.stepDown()
		c.giveUp()
		return
	}
	if to := c.preemptTarget(); c.cfg.Preempt && to != c.cfg.ID && c.reported == c.leadership() {
		// Followers are bound by their promises to this leader, so a
		// higher-ranked member cannot depose it; the leader hands over to
		// it instead, from the tick after it took over, so its leadership
		// is reported before it ends (followers that took its announcement
		// name a leader that did claim).
		_ = c.Transfer(to)
	}
}

// leaseDue is how many ticks from now tickLease may act: when the lease
// ends, or at once when a higher-ranked member waits for a handover.
func (c *core) leaseDue() int {
	end := c.leaseEnd()
	k := int(min(end-min(end, c.now), 1<<30))
	if c.cfg.Preempt && c.preemptTarget() != c.cfg.ID {
		k = min(k, 1)
	}
	return k
}

// tickProposal gives up a proposal that found no majority within
// ElectionTimeoutTicks.
func (c *core) tickProposal() {
	if c.q.ageProposal(c.cfg.ElectionTimeoutTicks) {
		c.giveUp()
	}
}
