package election

// Quiet following (Config.Vouched). A node that runs thousands of elections
// with the same few peers would send each leader a heartbeat per election
// and interval, each answered, although one exchange per pair of nodes says
// as much about who is alive. When the host vouches for a member (it hears
// from it steadily, for every election between them), a machine that
// follows that member keeps quiet: its liveness is the pair's, and its own
// heartbeat only checks, every quiet interval, what a pair's heartbeat
// cannot: that the leader still holds the leadership this node follows,
// with which support. A leader counts such a member as heard until a quiet
// interval and a leader timeout have passed since its last heartbeat, so a
// member that went over to another leadership without a word (a lost
// message) is re-announced to, and the two leaderships compared, within
// that time. A member the host stops vouching for is counted, and counts
// its leader, by its own heartbeats again, as without Vouched.
//
// The quiet heartbeat is not what tells a follower that its leadership
// changed: a new leadership (becomeLeader) counts no member heard until it
// speaks at its term, and announces itself to the others each round; the
// same leadership at a new term (a reassertion, a ring round that chose it
// again) owes each member an announcement until it speaks at that term
// (peer.owed), while what it said before still counts toward the support.
// A lost announcement is repeated at the leader's next round, whatever the
// quiet interval is.

// vouched reports whether the host vouches for member id (plain mode).
func (c *core) vouched(id NodeID) bool {
	return c.q == nil && c.cfg.Vouched != nil && id != 0 && id != c.cfg.ID && c.cfg.Vouched(id)
}

// A quiet follower learns its leader's support, which it weighs a rival
// against (plain_mode.go), from announcements: each round (tickLeader), a
// leader whose support changed since it last told it tells every member
// its host vouches for (those may keep quiet). A member it does not vouch
// for is told by the answers to its heartbeats, which come every interval
// while its own host does not vouch for the leader either, or, when it
// keeps quiet all the same (vouching one way only), by the announcement
// each round sends a member not heard lately: a leader timeout late at
// worst. A follower goes quiet only once its leader has answered a
// heartbeat of this leadership, so the leader has heard it and counts it.

// supportToTell reports whether this leader, whose followers may keep
// quiet, has a support to tell, and takes it as told.
func (c *core) supportToTell() bool {
	if c.q != nil || c.cfg.Vouched == nil {
		return false
	}
	s := c.support()
	if s == c.told {
		return false
	}
	c.told = s
	return true
}

// roundDue is how many ticks from now this leader's next re-announcement
// round (tickLeader) may send something. Every leader-timeout round may,
// unless its followers keep quiet: then a round sends nothing while every
// member is heard lately and the support is the one told, and the first
// that may is the first after a member's window ends (heardWindow, as the
// host answers now: the host recounts the machines when its answer
// changes), or after a carried support lapses.
func (c *core) roundDue() uint64 {
	lt := uint64(c.cfg.LeaderTimeoutTicks)
	next := lt - (c.now-c.leaseFrom)%lt
	if c.q != nil || c.cfg.Vouched == nil || c.now < c.carriedEnd || c.support() != c.told {
		return next
	}
	end := uint64(0) // the last tick every member is heard lately
	for i := range c.members {
		m := &c.members[i]
		if !m.heard || m.owed {
			return next
		}
		if e := m.heardAt + c.heardWindow(m); i == 0 || e < end {
			end = e
		}
	}
	if len(c.members) == 0 || end < c.now+next {
		return next
	}
	// The first round tick after end.
	k := (end + 1 - c.leaseFrom + lt - 1) / lt
	return c.leaseFrom + k*lt - c.now
}

// quietLeaderFresh says, for a follower that kept quiet at its last tick,
// whether its leader counts as fresh: the host still vouches for it. (A
// quiet follower's own counters say nothing of the leader; until its next
// tick applies the host's new answer, this one does.)
func (c *core) quietLeaderFresh() bool { return c.vouched(c.leader) }

// quietNow reports whether this follower is to keep quiet: its leader is
// vouched for and has answered it in this leadership.
func (c *core) quietNow() bool { return c.acked && c.vouched(c.leader) }

// keepsQuiet reports whether this follower keeps quiet (quietNow), and
// applies a change since its last tick, of its quiet and of the host's
// vouching for its leader (leaderVouched). Going quiet, its next heartbeat
// falls at a random point of the quiet interval, so that the elections
// that went quiet together do not all heartbeat together. When the host
// stops vouching, the leader is timed from now, and asked at once.
//
// A follower of a vouched leader that has not answered it yet in this
// leadership heartbeats every interval until answered, as without Vouched,
// and counts the time since (sinceAck: a leader that answers with an older
// term of its own leadership is handed its announcement after half a
// timeout), but does not time its leader out either: an unanswered
// heartbeat to a vouched leader is one its busy inbox refused. After a
// mass failover each new leader's followers ask it at once, thousands of
// heartbeats per interval, and timed out for the answers it could not
// give in time, they campaigned against a live leader and made it busier
// (at 10,000 elections the failover never settled).
func (c *core) keepsQuiet() bool {
	v, lv := c.quietNow(), c.vouched(c.leader)
	switch {
	case v && !c.quiet:
		c.hbElapsed = c.cfg.Rand(c.cfg.QuietHeartbeatTicks)
	case !lv && c.leaderVouched:
		c.sinceAck, c.hbElapsed = 0, c.cfg.HeartbeatTicks
	}
	c.quiet, c.leaderVouched = v, lv
	if v {
		c.sinceAck = 0 // the pair's heartbeats answer for the leader
	}
	return v
}

// answerUncounted: this quiet follower's leader announced its own
// leadership to it again with the support it announced before, short of
// every member. A leader sends that only to a member it has not heard
// lately (a change of support is told to every vouched member once), so
// the member left out may be this node, and it answers with its heartbeat
// at once. Vouching may be one way: the leader's host may have stopped
// vouching for this node a moment (a gap in what it heard) while this
// host kept vouching for the leader, so this node kept quiet and the
// leader counts it by a heartbeat long past; unanswered, the leader would
// announce itself every round, and tell every member its support when it
// fell and when it rose, until this node's next quiet heartbeat, up to a
// quiet interval later. It answers at most once a quiet interval: a
// leader whose host never vouches for this node counts it a leader
// timeout after each heartbeat, and an answer every other round would
// make its support, and the tells of it to every member, flap as often.
// An announcement of every member's support counts this node (as far as
// the two agree on the members): no answer.
func (c *core) answerUncounted(support int) {
	if !c.quiet || support != c.leaderSupport || support >= len(c.members)+1 ||
		c.answeredAt != 0 && c.now+1-c.answeredAt < uint64(c.cfg.QuietHeartbeatTicks) {
		return
	}
	c.answeredAt = c.now + 1
	c.askLeader()
}

// quietChanges reports whether the next tick changes this follower's
// quiet or the host's vouching for its leader (keepsQuiet): that tick
// must be applied for real, not skipped.
func (c *core) quietChanges() bool {
	return c.quietNow() != c.quiet || c.vouched(c.leader) != c.leaderVouched
}

// heardWindow is how long after its last heartbeat a leader counts member
// m as heard: a leader timeout, and a quiet interval more if the host
// vouched for it when it was heard and has vouched for it since. A member
// the host stopped vouching for (a partition) and vouches for again (the
// heal) counts by its new heartbeats only: what it said before the cut is
// no word on whom it follows now.
func (c *core) heardWindow(m *peer) uint64 {
	w := uint64(c.cfg.LeaderTimeoutTicks)
	if m.quietHeard && c.vouched(m.ID) {
		w += uint64(c.cfg.QuietHeartbeatTicks)
	}
	return w
}

// vouchedNow: the host started vouching for member id (EventVouched), after
// hearing it steadily for a leader timeout. A heartbeat heard within that
// time came within the run of hearing the host vouches for, so it counts
// for a quiet interval, as one heard after it would: without that, a
// leader would count its followers only for a leader timeout after they go
// quiet, and announce itself to each of them every round until its first
// quiet heartbeat, a quiet interval later at worst.
func (c *core) vouchedNow(id NodeID) {
	m := c.members.get(id)
	if m == nil || !m.heard || m.quietHeard || c.now-m.heardAt > uint64(c.cfg.LeaderTimeoutTicks) || !c.vouched(id) {
		return
	}
	m.quietHeard, c.supportAt = true, 0
}

// stalled: the host stood still (EventStalled). Its members may have timed
// this leader out and campaigned meanwhile, and the heartbeats they sent
// before that wait in the host's inbox: read now, each would count its
// sender as heard, for a quiet interval while the host still vouches for
// it, and the rounds would announce nothing to a member that waits for a
// campaign's answer. So the next round tells every member who leads,
// whatever was heard, and what was heard before counts for a leader
// timeout only.
func (c *core) stalled() {
	if c.role != RoleLeader || c.q != nil || c.cfg.Vouched == nil {
		return
	}
	for i := range c.members {
		c.members[i].quietHeard = false
	}
	c.supportAt, c.told, c.tellAll = 0, 0, true // support is never 0: the next round tells
}

// heardLately reports whether live member id was heard within its window
// (heardWindow).
func (c *core) heardLately(id NodeID) bool {
	m := c.members.get(id)
	return m != nil && c.lately(m)
}

// lately reports whether member m was heard within its window.
func (c *core) lately(m *peer) bool {
	return m.heard && c.now-m.heardAt <= c.heardWindow(m)
}

// Hears reports whether this leader counts member id as following its
// leadership now (Hearer): a round would announce nothing to it.
func (c *core) Hears(id NodeID) bool {
	return c.role == RoleLeader && id != c.cfg.ID && !c.owesAnnouncement(id)
}

// owesAnnouncement reports whether this leader's round announces its
// leadership to member id: one not heard lately, or not heard since the
// leadership moved to its current term (owed).
func (c *core) owesAnnouncement(id NodeID) bool {
	m := c.members.get(id)
	return m == nil || m.owed || !c.lately(m)
}
