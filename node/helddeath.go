package node

import (
	"time"

	"github.com/electord/electord/election"
)

// Gossip's verdict that a member is dead is held back while this node
// still hears from that member itself: a message from it (any message, of
// any election) arrived within the heartbeat timeout. Gossip can be wrong
// about a live member: a node resumed from a pause (SIGSTOP, a starved
// process) finds its probes' deadlines past and suspects members that
// answered meanwhile, and a suspicion that reaches its timeout before the
// member's refutation makes it dead here. Applied, the verdict made the
// election refuse the live leader's answers ("not a live member") and
// suspect it a timeout later, so a follower's pause left it without a
// leader for most of a second (the quorum chaos hour on 21a12c1, ring:
// node 2, paused 1.07 s, declared leader 5 dead 1.8 s after it resumed
// and showed no leader for 0.65 s while 5 went on answering it).
//
// A held verdict is applied once the member has been silent for the
// heartbeat timeout, or dropped when gossip takes it back (the member
// refuted it: a join or update). A member that really died or was cut off
// stops sending: gossip's verdict comes seconds after the failure (its
// suspicion timeout), so it is applied at once. A leave is the member's
// own word and is never held; a crash found by the transport (a refused
// connection, ErrPeerDown) does not go through gossip.
type heldDeaths struct {
	heard map[election.NodeID]time.Time   // when a message from each member last arrived
	held  map[election.NodeID]MemberEvent // verdicts held back
	c     <-chan time.Time                // fires at the earliest recheck
}

// heardFrom records that a message from id arrived now (loop only). Only
// members gossip has listed are recorded: a message can name any sender,
// and the table stays the size of the membership.
func (n *Node) heardFrom(id election.NodeID, now time.Time) {
	if n.named != nil {
		delete(n.named.gone, id) // it speaks: its next refusal is news
	}
	if _, ok := n.members[id]; !ok || id == n.cfg.Self.ID {
		return
	}
	if n.deaths.heard == nil {
		n.deaths.heard = map[election.NodeID]time.Time{}
	}
	n.deaths.heard[id] = now
	if n.named != nil {
		n.pairHeard(id)
	}
}

// holdDeath reports whether ev, a membership event, is a death to hold
// back now (the member was heard from within the heartbeat timeout); a
// later verdict about a member replaces a held one.
func (n *Node) holdDeath(ev MemberEvent) bool {
	id := ev.Member.ID
	if ev.Type != MemberDead {
		delete(n.deaths.held, id)
		return false
	}
	if !n.recentlyHeard(id, time.Now()) {
		delete(n.deaths.held, id)
		return false
	}
	if n.deaths.held == nil {
		n.deaths.held = map[election.NodeID]MemberEvent{}
	}
	n.deaths.held[id] = ev
	n.log.Info("gossip says a member is dead, but it was heard from within the heartbeat timeout: held until it goes silent", "id", uint64(id), "heard", n.deaths.heard[id].Format(time.RFC3339Nano))
	n.armDeaths()
	return true
}

// recentlyHeard: a message from id arrived within the heartbeat timeout.
func (n *Node) recentlyHeard(id election.NodeID, now time.Time) bool {
	at, ok := n.deaths.heard[id]
	return ok && now.Sub(at) < n.cfg.HeartbeatTimeout
}

// armDeaths sets the recheck for the earliest held verdict's end.
func (n *Node) armDeaths() {
	var first time.Time
	for id := range n.deaths.held {
		if end := n.deaths.heard[id].Add(n.cfg.HeartbeatTimeout); first.IsZero() || end.Before(first) {
			first = end
		}
	}
	if first.IsZero() {
		n.deaths.c = nil
		return
	}
	n.deaths.c = time.After(time.Until(first))
}

// recheckDeaths applies the held verdicts whose members have been silent
// for the heartbeat timeout since (loop only).
func (n *Node) recheckDeaths() {
	now := time.Now()
	for id, ev := range n.deaths.held {
		if n.recentlyHeard(id, now) {
			continue
		}
		delete(n.deaths.held, id)
		n.log.Info("a held death applied: the member has been silent for the heartbeat timeout", "id", uint64(id))
		n.applyMemberEvent(ev)
	}
	n.armDeaths()
}
