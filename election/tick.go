package election

// Tick implements StateMachine.
func (c *core) Tick() {
	c.now++
	if c.excludeEnd != 0 && c.now >= c.excludeEnd {
		c.excludeEnd = 0
	}
	switch c.role {
	case RoleLeader:
		c.tickLeader()
	case RoleFollower:
		c.tickFollower()
	case RoleElecting:
		if c.q != nil {
			c.tickProposal()
		}
	case RoleNoLeader:
		c.tickNoLeader()
	}
	c.algo.Tick(c.host())
}

func (c *core) tickLeader() {
	// Re-announce to live members that have gone quiet: a member that
	// follows someone else (a healed partition, a missed announcement) then
	// answers with the newer leadership, or starts following this node. A
	// support to tell goes to the members the host vouches for, which may
	// keep quiet; the others heartbeat, and each answer carries it (a
	// thousand elections starting together would otherwise announce each
	// rise of their support, heartbeat by heartbeat, to every member).
	if (c.now-c.leaseFrom)%uint64(c.cfg.LeaderTimeoutTicks) == 0 {
		all := c.supportToTell()
		every := all && c.tellAll
		c.tellAll = false
		for _, r := range c.ringView() {
			if r.ID != c.cfg.ID && (every || all && c.vouched(r.ID) || c.owesAnnouncement(r.ID)) {
				c.send(Message{Type: MsgCoordinator, To: r.ID, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
			}
		}
	}
	if c.q != nil {
		c.tickLease()
	} else {
		c.tickPreempt()
	}
}

func (c *core) tickFollower() {
	if c.keepsQuiet() {
		if c.hbElapsed++; c.hbElapsed >= c.cfg.QuietHeartbeatTicks {
			c.hbElapsed = 0
			c.send(c.heartbeat())
		}
		return
	}
	c.hbElapsed++
	if c.hbElapsed >= c.cfg.HeartbeatTicks {
		c.hbElapsed = 0
		c.send(c.heartbeat())
	}
	c.sinceAck++
	if !c.leaderVouched && c.sinceAck > c.suspectAt {
		c.suspect(0)
	}
}

// askLeader sends the leader this node follows a heartbeat now, out of
// turn, at most once a tick, and restarts the heartbeat interval from it.
// Used when another node's word casts doubt on the leader (see
// Host.AskLeader), and by a quiet follower its leader may not count
// (answerUncounted): over a real network a leader whose process is gone
// refuses the connection, and the node campaigns at once.
func (c *core) askLeader() {
	if c.role != RoleFollower || c.leader == 0 || c.leader == c.cfg.ID || c.askedAt == c.now+1 {
		return
	}
	c.askedAt, c.hbElapsed = c.now+1, 0
	c.send(c.heartbeat())
}

// heartbeat is a follower's heartbeat to its leader. In quorum mode it
// echoes the last stamp the leader sent, which dates this node's promise.
func (c *core) heartbeat() Message {
	m := Message{Type: MsgHeartbeat, To: c.leader, Term: c.leaderTerm, Leader: c.leader}
	if c.q != nil {
		m.Stamp = c.q.lastStamp
	}
	return m
}

func (c *core) tickNoLeader() {
	c.idle++
	if c.idle >= c.idleWait && !c.excluded() && !c.bootstrap() {
		if c.leaderTerm == 0 && !c.coldRanked {
			// A cluster's first election: every node's wait (or its
			// bootstrap) ends at about the same moment. Campaign in rank
			// order, as after losing a leader (SuspicionDelayer): the
			// highest node goes first and is usually announced before the
			// next one's turn, so n nodes starting together cost O(n)
			// messages, not an O(n^2) storm that a loaded cluster may never
			// settle. Unlike after a loss, the wait has no cap (a tick for
			// each member above): under a cap, every node ranked below it
			// would campaign on the same tick whenever the highest one's
			// announcement took longer than the cap to reach them, as it
			// does when it opens a new connection to every member on
			// machines still starting processes.
			c.coldRanked = true
			if w := c.coldWait(); w > 0 {
				c.idle, c.idleWait = 0, w
				return
			}
		}
		c.Campaign()
	}
}

// Advance does what k Ticks do, applying at once the ticks that only move
// counters (those before the machine is next due, TicksUntilDue) and
// ticking it for real on each due one. A host that ticks a machine only
// when it is due, and catches it up before anything else reaches it, calls
// this: many idle machines then cost nothing per tick.
func (c *core) Advance(k int) {
	skipper, ok := c.algo.(TickSkipper)
	for k > 0 {
		n := 0
		if ok {
			n = min(k, c.skippable())
		}
		if n == 0 {
			c.Tick()
			k--
			continue
		}
		c.skip(n, skipper)
		k -= n
	}
}

// skippable is how many of the next Ticks only move counters, as skip
// applies them: those before the machine is due (TicksUntilDue), in plain
// mode, and, with no leader, before the wait ends (where a Tick also
// re-decides the wait, even for a node that does not stand). Quorum mode
// is ticked tick by tick: its lease and proposals keep more state per tick.
func (c *core) skippable() int {
	if c.q != nil {
		return 0
	}
	n := 1 << 30
	if due := c.TicksUntilDue(); due != 0 {
		n = due - 1
	}
	if c.role == RoleNoLeader {
		n = min(n, c.idleWait-c.idle-1)
	}
	return max(n, 0)
}

// skip is k Ticks none of which is due (skippable): the clock and the
// counters move, nothing else.
func (c *core) skip(k int, algo TickSkipper) {
	c.now += uint64(k)
	if c.excludeEnd != 0 && c.now >= c.excludeEnd {
		c.excludeEnd = 0
	}
	switch c.role {
	case RoleFollower:
		c.hbElapsed += k
		if !c.quiet {
			c.sinceAck += k
		}
	case RoleNoLeader:
		c.idle += k
	}
	algo.SkipTicks(k)
}

// TicksUntilDue says how many Ticks from now this machine may next act:
// send a message or change its leadership (1: the next Tick may; 0: no timer
// is armed). The Ticks before it only advance counters. The instance loop
// uses it to sleep through idle ticks (node.DueTicker); it errs early, never
// late, and the simulator checks that after every tick.
func (c *core) TicksUntilDue() int {
	due := 0
	at := func(k int) {
		k = max(k, 1)
		if due == 0 || k < due {
			due = k
		}
	}
	switch c.role {
	case RoleLeader:
		at(int(c.roundDue())) // the re-announcement round
		if c.q != nil {
			at(c.leaseDue())
		} else if c.cfg.Preempt && c.preemptTarget() != c.cfg.ID {
			at(1) // a handover to a higher-ranked member (tickPreempt)
		}
	case RoleFollower:
		switch {
		case c.quietChanges():
			at(1) // keepsQuiet's change is applied by a real tick
		case c.quiet:
			at(c.cfg.QuietHeartbeatTicks - c.hbElapsed)
		default:
			at(c.cfg.HeartbeatTicks - c.hbElapsed)
			if !c.leaderVouched {
				at(c.suspectAt - c.sinceAck + 1)
			}
		}
	case RoleElecting:
		if c.q != nil && c.q.proposing() {
			at(c.q.proposalDue(c.cfg.ElectionTimeoutTicks))
		}
	case RoleNoLeader:
		// A node that does not stand has nothing to campaign for.
		if !c.withdrawn && (!c.bootstrapping || len(c.ringView()) >= c.cfg.BootstrapExpect) {
			k := c.idleWait - c.idle
			if c.excludeEnd != 0 {
				k = max(k, int(min(c.excludeEnd-min(c.excludeEnd, c.now), 1<<30)))
			}
			at(k)
		}
	}
	if d, ok := c.algo.(TickDuer); ok {
		if k := d.TicksUntilDue(c.host()); k > 0 {
			at(k)
		}
	} else {
		at(1)
	}
	return due
}

// bootstrap reports whether this node is a first start that has not yet
// seen BootstrapExpect members nor known a leader, and so does not campaign
// on its own. It latches when asked: the first time it finds enough members
// it stops waiting for good.
func (c *core) bootstrap() bool {
	if c.bootstrapping && len(c.ringView()) >= c.cfg.BootstrapExpect {
		c.bootstrapping = false // the cluster has formed: never wait again
	}
	return c.bootstrapping
}

// suspect reacts to a leader that stopped answering: campaign now (the
// detection timeout was jittered already), or, ranked below others, after
// the algorithm's wait and lead ticks more (Event.Lead).
func (c *core) suspect(lead int) {
	wait := c.suspicionWait(0)
	if wait > 0 {
		wait += min(max(lead, 0), c.cfg.LeaderTimeoutTicks)
	}
	c.noLeader(wait)
	if c.followHeld() {
		return // a rival's announcement held while bound (plain_mode.go)
	}
	if wait == 0 {
		c.Campaign()
	}
}

// coldWait is how long a node waits before a cluster's first election: a
// tick for each live member above it if the algorithm orders campaigns by
// rank (a SuspicionDelayer), else none.
func (c *core) coldWait() int {
	if _, ok := c.algo.(SuspicionDelayer); !ok {
		return 0
	}
	above := RanksAbove(c.host())
	if above == 0 {
		return 0
	}
	return above + coldLeadTicks*c.cfg.LeaderTimeoutTicks
}

// coldLeadTicks is how many leader timeouts the highest node has, in a
// cluster's first election, before anyone else campaigns: the rank order
// alone (a tick a rank) lets the nodes just below the highest campaign
// before its announcement reaches them whenever a loaded host delays it
// (a first announcement opens a new connection to every member), and each
// such campaign sends its own announcements. Nothing is replaced in a hurry in a
// first election, and when the highest node is up its announcement comes
// long before this ends.
const coldLeadTicks = 2

// suspicionWait is how long to wait before campaigning after losing the
// leader: the algorithm's SuspicionDelay if it has one, else fallback.
func (c *core) suspicionWait(fallback int) int {
	if d, ok := c.algo.(SuspicionDelayer); ok {
		return max(0, d.SuspicionDelay(c.host()))
	}
	return fallback
}
