package election

// Plain mode's answer to a healed partition: a leadership's support.
//
// Without quorum every connected group elects a leader of its own, so when a
// partition heals two leaderships meet. Terms alone would pick the higher
// one, which is usually the cut-off side's: a node alone times out, campaigns
// and wins at a term above the majority's. Instead the leadership with the
// larger support wins. A leader's support is itself and the members it heard
// from (heartbeats, acks) within a leader timeout; it tells its followers in
// its heartbeat answers and announcements (Message.Support), and they name it
// when they refuse a rival.
//
//   - A follower bound to a healthy leader (its answer came within a leader
//     timeout) follows a rival's announcement only if the rival's support is
//     at least its leader's (a tie goes to the rival, whose term is higher,
//     as terms alone would decide), or if its own leader is found gone.
//     Otherwise it holds the announcement, refuses it naming its leader, its
//     term and its support, and asks its leader at once: if that heartbeat
//     fails (or the leader times out, or is declared dead or gone), it takes
//     the held announcement up. It asks its leader too when a rival's
//     Election passes it, so that after a crash the check is over before
//     the round's announcement comes.
//   - A leader that meets a rival leadership first-hand (its announcement, or
//     its refusal naming itself) compares supports: the smaller yields. A
//     yielding leader at the higher term goes leaderless, keeping its
//     leadership term, and tells the winner its term; a winning leader at the
//     lower term reasserts above every term seen. Every node then follows the
//     winner without its reported term going back (S3).
//   - A rival leadership heard second-hand (a follower naming it) is checked
//     at its source: the leader sends the rival its own announcement, which
//     the rival compares first-hand. If the named leader is this leader's
//     own follower, that leadership is over: the leader reasserts above it.
//   - A handover (transfer, resign, preempt) carries the old leader's support
//     to the new one (TimeoutNow, and the ring's round announcement sent by a
//     resigning initiator), which claims it for a leader timeout, so the old
//     leader's followers, tied, take the new leader's higher term.
//   - A resign goes to a member of the leader's support (resignTarget), and
//     a node handing over follows no rival with less support than it handed
//     on (handingOver): a node that was cut off and leads alone must be
//     neither handed the larger side's leadership nor followed by the
//     resigner when a heal and a resign meet.
//
// Quorum mode has its own binding (promises and leases, quorum_mode.go) and
// none of this runs there (c.q != nil).

// support is how many members, this leader included, it heard from within a
// leader timeout, or the support it carries from a handover while that lasts.
//
// The count is kept for the rest of the tick (a leader stamps it on every
// answer and announcement, and counting is O(members)) unless a member not
// counted is heard (heard) or one leaves.
func (c *core) support() int {
	if c.supportAt != c.now+1 {
		n := 1
		for _, m := range c.members {
			if c.lately(&m) {
				n++
			}
		}
		c.supportN, c.supportAt = n, c.now+1
	}
	n := c.supportN
	if c.now < c.carriedEnd {
		n = max(n, c.carried)
	}
	return n
}

// heard records that this leader heard from member id now (a heartbeat, an
// ack). A member not counted before makes support count again.
func (c *core) heard(id NodeID) {
	m := c.members.get(id)
	if m == nil {
		return // only a live member's word is taken (validate)
	}
	if !c.lately(m) {
		c.supportAt = 0
	}
	m.heardAt, m.heard, m.quietHeard, m.owed = c.now, true, c.vouched(id), false
}

// claimed is the support a message claims, clamped to the live members this
// node knows (itself included): a peer cannot claim more nodes than there
// are. A message without one (an older peer) claims the leader alone.
func (c *core) claimed(m Message) int {
	return max(1, min(int(m.Support), len(c.members)+1))
}

// carry lets this node claim support s on behalf of a leadership handed to
// it (or, for a ring initiator that resigned, handed on by it) for a leader
// timeout, by which time the followers that moved have been heard.
func (c *core) carry(s int) {
	c.carried, c.carriedEnd = s, c.now+uint64(c.cfg.LeaderTimeoutTicks)
}

// stampSupport fills in the support a plain-mode message claims for the
// leadership it names, unless it carries one already (a ring announcement
// passed on keeps its initiator's).
func (c *core) stampSupport(m *Message) {
	if c.q != nil || m.Support != 0 {
		return
	}
	if m.Type != MsgCoordinator && m.Type != MsgHeartbeatResp && m.Type != MsgTimeoutNow {
		return
	}
	switch {
	case (m.Type == MsgTimeoutNow || m.Type == MsgCoordinator && m.Leader == c.leader && c.role == RoleFollower) && c.now < c.carriedEnd:
		// A handover, or an announcement of the leader this node follows
		// sent while it hands a leadership on: a ring round started by a
		// leader that resigned (which already follows the winner it names,
		// Host.Adopt), or by the node it handed its round to. The leader it
		// names succeeds that leadership.
		m.Support = uint32(c.carried)
	case m.Leader == c.cfg.ID && c.role == RoleLeader:
		m.Support = uint32(c.support())
	case m.Leader != 0 && m.Leader == c.leader && c.role == RoleFollower:
		m.Support = uint32(c.leaderSupport)
	}
}

// bound reports whether this node, in plain mode, follows a leader whose
// answer came within a leader timeout, or whose liveness the host vouches
// for (leaderVouched): it does not follow a rival with less support than
// that leader's (see the top of this file).
func (c *core) bound() bool {
	if c.q == nil && c.role == RoleFollower && c.leaderVouched {
		return c.quietLeaderFresh()
	}
	return c.q == nil && c.role == RoleFollower && c.sinceAck <= c.cfg.LeaderTimeoutTicks
}

// rivalWins reports whether a rival leadership claiming m's support, at
// term m.Term, wins against support s at term t: the larger support, and on
// a tie the higher term.
func (c *core) rivalWins(m Message, s int, t Term) bool {
	r := c.claimed(m)
	return r > s || (r == s && m.Term > t)
}

// holdRival refuses a rival's announcement that reached a bound follower
// (see bound): it names its leader, its term and its support to the rival,
// keeps the announcement, and asks its own leader at once. If the leader is
// found gone, followHeld takes the announcement up.
func (c *core) holdRival(m Message) {
	c.observeTerm(m.Term)
	held := m
	c.held, c.heldAt = &held, c.now
	if m.Leader != c.cfg.ID {
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
	}
	c.askLeader()
}

// doubtLeader: in plain mode a bound follower that sees another node's
// Election, started after its leadership, asks its leader at once (after
// it answered or passed the Election on): the
// campaigner lost it, and if it is gone (its heartbeat fails) this node is
// bound no more by the time the round's announcement comes (which would
// otherwise be held until that check), so a crash failover is not slowed
// by the binding. A live leader only answers one heartbeat more.
func (c *core) doubtLeader(m Message) {
	if m.Type == MsgElection && c.role == RoleFollower && m.Term > c.leaderTerm && m.Initiator != c.leader {
		c.askLeader()
	}
}

// leaderFailed reports whether a heartbeat to the leader this node follows,
// refused by the leader's host (Event.Refused), shows it gone early, in
// plain mode: it was sent while this node held a rival's announcement, or
// out of turn (askLeader) within a leader timeout, because another node's
// word cast doubt on the leader or the leader's announcement may not have
// counted this node. A refusal is the leader's host saying its process is
// gone, whatever the heartbeat was sent for.
func (c *core) leaderFailed(m Message) bool {
	if c.q != nil || m.Type != MsgHeartbeat || c.role != RoleFollower || m.To != c.leader {
		return false
	}
	return c.held != nil || (c.askedAt != 0 && c.now+1-c.askedAt <= uint64(c.cfg.LeaderTimeoutTicks))
}

// followHeld takes up the rival announcement this node held while it was
// bound, once it lost its leader, if it was held within a leader timeout.
// It reports whether this node now follows or leads.
func (c *core) followHeld() bool {
	m := c.held
	c.held = nil
	if m == nil || c.bound() || c.now-c.heldAt > uint64(c.cfg.LeaderTimeoutTicks) {
		return false
	}
	if !c.members.live(m.Leader) && m.Leader != c.cfg.ID {
		return false
	}
	c.stepCoordinatorPlain(*m)
	return c.role == RoleFollower || c.role == RoleLeader
}

// leaderMeetsRival is a plain-mode leader's answer to a rival leadership
// named first-hand, by its leader (its announcement, or its refusal of
// this leader's), and reports whether it handled it. The smaller support
// yields (see the top of this file).
func (c *core) leaderMeetsRival(m Message) bool {
	if c.q != nil || c.role != RoleLeader || m.Leader == c.cfg.ID || m.Leader == 0 || m.Term == c.leaderTerm {
		return false
	}
	wins := c.rivalWins(m, c.support(), c.leaderTerm)
	switch {
	case wins && m.Term > c.leaderTerm:
		return false // followed as any newer leadership is
	case wins:
		// The rival, at a lower term, has the larger support: stop leading,
		// keep this leadership's term (it was reported), and tell the rival
		// of it, so that it reasserts above it (stepHeartbeatResp).
		c.giveUp()
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Reject: true})
	case m.Term > c.leaderTerm:
		// This leadership has the larger support: lead on above the
		// rival's term, so that its followers can follow this one.
		c.observeTerm(m.Term)
		c.reassert()
	default:
		// The rival is at a lower term and yields when it hears of this
		// leadership: tell it.
		c.send(Message{Type: MsgCoordinator, To: m.Leader, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
	}
	return true
}

// leaderHearsOfRival is a plain-mode leader's answer to a rival leadership
// named second-hand (a member's refusal naming its leader, or a ring
// announcement passed on), and reports whether it handled it. The word of
// the member is not enough to yield on: the rival's own leader is asked, by
// this leader's announcement, which it compares first-hand. A rival that is
// this leader's own follower (heard within a leader timeout) leads no more:
// the member that still names it will follow this leader once it reasserts
// above that term.
func (c *core) leaderHearsOfRival(m Message) bool {
	if c.q != nil || c.role != RoleLeader || m.Leader == c.cfg.ID || m.Leader == 0 || m.From == m.Leader {
		return false
	}
	if c.heardLately(m.Leader) {
		if m.Term > c.leaderTerm {
			c.observeTerm(m.Term)
			c.reassert()
		}
		return true
	}
	if c.members.live(m.Leader) && m.Term != c.leaderTerm {
		c.send(Message{Type: MsgCoordinator, To: m.Leader, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
	}
	return true
}

// tickPreempt is Preempt in plain mode, the leader's job as in quorum mode:
// bound followers would refuse a higher-ranked member's own campaign, so a
// leader that sees one hands over to the highest (a transfer, which carries
// its support), from the tick after its leadership was reported.
func (c *core) tickPreempt() {
	if to := c.preemptTarget(); c.cfg.Preempt && to != c.cfg.ID && c.reported == c.leadership() {
		_ = c.Transfer(to)
	}
}

// resignTarget is, in plain mode, the member a resigning leader hands its
// leadership to directly (Transfer) instead of by the algorithm's election,
// and reports whether there is one: the highest-ranked member it heard from
// within a leader timeout (its support), once it has led for a leader
// timeout.
//
// The rule: a resign hands the leadership to a member of its support. A
// member heard within a leader timeout followed this leadership then; one
// not heard, after a leader timeout of leading (every follower heartbeats
// more often than that), did not: it crashed, left, or was cut off, and a
// node that was cut off may lead alone at a higher term, just brought back
// by a heal (or about to be: membership may list it again only after the
// resign). An election would reach it: a ring round would be ended by it as
// the sitting leader, or elect it as the sticky incumbent or the highest
// candidate, and a bully election handed to the highest member would go to
// it or be answered by it; while the election ran the resigner's followers
// got no answer from their leader and let the rival's announcement in. The
// larger side's leadership, and its support, would pass to a node that side
// never followed. Handed to a member of the support, with the support
// carried (the TimeoutNow), the successor's announcement is followed by the
// followers at once (a tie, at a higher term), and the rival meets it and
// yields to the larger support. When every live member was heard the
// successor is the one the election would pick (the highest live member
// other than this node), in one TimeoutNow and one round of announcements.
//
// A leadership younger than a leader timeout may not have heard its
// followers yet (nor have any support to hand on), and one that heard no
// member has no side to hand to: they resign by the algorithm's election.
func (c *core) resignTarget() (NodeID, bool) {
	lt := uint64(c.cfg.LeaderTimeoutTicks)
	if c.q != nil || c.now-c.leaseFrom < lt {
		return 0, false
	}
	ring := c.ringView()
	for i := len(ring) - 1; i >= 0; i-- {
		id := ring[i].ID
		if id != c.cfg.ID && c.heardLately(id) && !c.members.saysNotStanding(id) {
			return id, true
		}
	}
	return 0, false
}

// handingOver reports whether this node, in plain mode, handed its
// leadership over (Transfer, or a Resign that transferred: resignTarget)
// within a leader timeout and no leadership has settled since. Until then
// it does not follow a rival leadership with less support than the one it
// handed on (carried): it records the rival's term as seen and ignores its
// announcement, as its followers, bound to it, hold it. Were it to follow the rival, its answers
// to its followers' heartbeats would name the rival, and they would follow
// it on the word of their own leader, although they never heard from it: a
// node that was cut off and led alone would take the larger side over in
// the middle of the handover. The successor, which claims the carried
// support, meets the rival itself, and the smaller support yields.
func (c *core) handingOver() bool {
	return c.q == nil && c.role != RoleLeader && c.now < c.handingEnd && c.now < c.carriedEnd
}
