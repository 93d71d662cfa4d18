package election

// Observe implements StateMachine.
func (c *core) Observe(ev Event) {
	switch ev.Type {
	case EventJoin:
		id := ev.Member.ID
		if id == 0 || id == c.cfg.ID {
			c.rejected++
			return
		}
		old, known := c.members.put(ev.Member)
		if !known || old != ev.Member {
			c.ring = nil
		}
		switch {
		case c.role == RoleLeader:
			// Tell the newcomer who leads; this also settles a healed partition.
			c.send(Message{Type: MsgCoordinator, To: id, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
		case c.role == RoleNoLeader && c.term != 0:
			// A node that knows of earlier terms (a restart, a healed
			// partition) asks each member it meets who leads, instead of
			// waiting to campaign: a leader whose gossip never saw this node
			// leave will not announce itself. Any reply names the leadership.
			c.send(Message{Type: MsgHeartbeat, To: id, Term: c.term, Leader: 0})
		}
	case EventLeave, EventDead:
		id := ev.Member.ID
		// A follower may follow a leader that is no member any more: a
		// death verdict against a fresh leader removes it and keeps it
		// followed (below). Its leave still ends that: a leader it no
		// longer counts among the members would otherwise be followed
		// until some rival outweighs it, and a quiet follower never times
		// it out (its host vouches for the node, which runs on).
		if !c.members.remove(id) && (ev.Type != EventLeave || c.role != RoleFollower || id != c.leader) {
			return
		}
		c.ring, c.supportAt = nil, 0
		if c.role == RoleFollower && id == c.leader && (ev.Type == EventLeave || !c.leaderFresh()) {
			// A leader that said it leaves is gone. Gossip's death verdict
			// alone is not taken against a leader that answered this node's
			// heartbeat within half a timeout: memberlist declares a node
			// dead when its refutation of a suspicion comes late (raised
			// while it was cut off, and timing out just after the cut
			// healed), so a live leader can be declared dead, and followers
			// that dropped it would have no leader for up to a timeout. The
			// heartbeat timeout still decides: a leader that is really gone stops answering
			// (and a dead process's host refuses at once), and until its
			// refutation rejoins it, its answers are refused as a
			// non-member's.
			c.noLeader(c.suspicionWait(c.jitter()))
			c.followHeld()
		}
	case EventLeaderTimeout:
		if c.role == RoleFollower {
			c.suspect(ev.Lead)
		}
	case EventUnvouched:
		if m := c.members.get(ev.Member.ID); m != nil && m.quietHeard {
			m.quietHeard, c.supportAt = false, 0
		}
	case EventVouched:
		c.vouchedNow(ev.Member.ID)
	case EventStalled:
		c.stalled()
	case EventSendFailed, EventPeerBusy:
		// Only a message this node could have sent comes back: anything
		// else is a caller's bug, and the algorithms would resend it.
		if ev.Msg.From != c.cfg.ID || CheckMessage(ev.Msg, 0) != nil {
			c.rejected++
			return
		}
		if ev.Type == EventSendFailed && ev.Refused && c.leaderFailed(ev.Msg) {
			// A follower asked its leader because another node's word cast
			// doubt on it, and the leader's host refuses the connection: it
			// is found gone, and a rival held meanwhile is followed
			// (plain_mode.go). Only a refusal counts: right after a heal a
			// heartbeat can time out on a live leader's old connection, and
			// taking that as its death handed the cluster to the cut-off
			// node the bound follower was holding.
			c.suspect(0)
			return
		}
		if b, ok := c.algo.(BusyObserver); ok && ev.Type == EventPeerBusy {
			b.PeerBusy(c.host(), ev.Msg)
			return
		}
		// A busy refusal is a failed send to an algorithm without the
		// feature (the ring skips to the next successor).
		c.algo.SendFailed(c.host(), ev.Msg)
	}
}
