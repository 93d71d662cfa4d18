package node

import (
	"context"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// Run runs the loop until ctx ends. It joins gossip first.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.stopped)
	defer n.hub.closeAll()
	defer n.stopAnnouncing()
	if err := n.joinGossip(); err != nil {
		return err
	}
	n.in.refusing.Store(n.sm.Status().RefusesElections)
	n.in.serving.Store(true)
	n.clock.start()
	defer n.clock.stop()
	for {
		var reply chan election.Message
		var replyTo election.NodeID
		n.cause = cause{}
		select {
		case <-ctx.Done():
			n.in.serving.Store(false)
			n.withdraw() // peers campaign when they hear of the leave
			// The named elections too, before the leave: a peer that hears
			// of it stops counting this node at once (a voter's promise to
			// it ends), while the leave can take seconds, and a view left
			// showing this node leading would claim beside its successor.
			n.stopNamed()
			n.leaveGossip()
			return nil
		case <-n.clock.C():
			if !n.halted() {
				n.clock.fire()
			}
		case <-n.namedC():
			if !n.halted() {
				n.named.clock.fire()
			}
		case <-n.in.named.Ready():
			in, ok := n.in.popNamed()
			if !ok || n.halted() {
				continue
			}
			n.stepNamed(in) // a named election's: its own machine (named.go)
			n.moreNamed()
		case <-n.in.msgs.Ready():
			in, ok := n.in.msgs.Pop()
			if !ok || n.halted() {
				continue
			}
			n.cause = cause{kind: "message", msg: in.Msg}
			n.heardFrom(in.Msg.From, time.Now())
			n.heard(in.Msg)
			if err := n.sm.Step(in.Msg); err != nil {
				n.counters.Rejected.Add(1)
				n.refused(in.Msg, err)
				n.log.Warn("rejected a peer message", "err", err)
			}
			reply, replyTo = in.Reply, in.Msg.From
		case <-n.in.failures.Ready():
			f, ok := n.in.failures.Pop()
			if !ok {
				continue
			}
			m, kind := f.m, "send failed"
			if f.busy {
				kind = "peer busy"
			}
			if namedFailure(f) {
				n.namedSendFailed(f.event())
				n.moreNamedFailures()
				break
			}
			n.cause = cause{kind: kind, msg: m}
			// At debug: where the time after a network fault goes is in
			// which sends failed, when, and how (timed out, refused).
			n.log.Debug("peer message not delivered", "to", uint64(m.To), "type", m.Type, "term", m.Term, "err", f.err)
			if !n.halted() {
				n.sm.Observe(f.event())
			}
			if m.Type == election.MsgTimeoutNow && m.To == n.handingTo && m.To != 0 {
				n.handingTo = 0
				select {
				case n.handoverLost <- struct{}{}:
				default:
				}
			}
		case m := <-n.in.peerDown:
			n.cause = cause{kind: "peer down", msg: m}
			n.peerGone(m)
			n.namedPeerGone(m.To)
		case ev, ok := <-n.events:
			if !n.takeEvent(ev, ok) {
				continue
			}
			n.moreEvents()
		case c := <-n.cmds:
			n.cause = cause{kind: "command"}
			c()
		case <-n.retryC:
			n.retrySave()
		case <-n.deaths.c:
			n.cause = cause{kind: "membership"}
			n.recheckDeaths()
		}
		n.process(reply, replyTo)
		n.afterNamed()
		// What the inbox refuses follows the machine: a membership event
		// (the view reaching BootstrapExpect) changes it without a Ready.
		n.in.refusing.Store(n.sm.Status().RefusesElections)
		if n.updateLease() || n.announceDue {
			// After the lease: a new leadership's first event is its
			// claim, not the moment before its lease was stored.
			n.announceDue = false
			n.announce()
		}
		n.clock.arm()
	}
}

// maxEventBatch bounds the membership events moreEvents takes at once.
const maxEventBatch = 64

// moreEvents takes the membership events already waiting, up to
// maxEventBatch, as long as none has given the machine anything to do (a
// Ready): a cluster forming, or a partition healing, brings one Join per
// member, and publishing the member list after each was O(members) work and
// garbage per event (at 128 processes on 2 cores, 5% of all CPU while the
// cluster formed). The event that gives the machine work ends the batch, so
// process sees it as the cause, as it would alone.
func (n *Node) moreEvents() {
	for range maxEventBatch {
		if n.events == nil || n.sm.HasReady() {
			return
		}
		select {
		case ev, ok := <-n.events:
			if !n.takeEvent(ev, ok) {
				return
			}
		default:
			return
		}
	}
}

// maxNamedBatch bounds the named elections' messages (and, apart, their
// send failures) one loop pass takes.
const maxNamedBatch = 512

// namedMsg says whether in belongs to a named election (or is a Candidacy).
func namedMsg(in transport.Inbound) bool {
	return in.Msg.Election != "" || in.Msg.Type == election.MsgCandidacy
}

// namedFailure says whether f is the failure of a named election's send.
func namedFailure(f failure) bool { return f.m.Election != "" }

// moreNamed steps the named elections' messages already queued behind the
// one just stepped, up to maxNamedBatch in all: the pass's drain
// (afterNamed) then serves them all with one synced write. A node that led
// many elections dies, and each of its peers is sent one Coordinator per
// election by the new leader; one pass each was one fsync each, and the
// last election's new leader was seen a hundred writes after the first's.
// It stops when a default-election message is waiting: that one is not
// held behind a whole batch of a named burst.
func (n *Node) moreNamed() {
	for range maxNamedBatch - 1 {
		if n.in.msgs.Len() > 0 {
			return
		}
		in, ok := n.in.popNamed()
		if !ok {
			return
		}
		n.stepNamed(in)
	}
}

// moreNamedFailures is moreNamed for send failures: a dead peer fails the
// sends of every election that talks to it at once.
func (n *Node) moreNamedFailures() {
	for range maxNamedBatch - 1 {
		f, ok := n.in.failures.PopIf(namedFailure)
		if !ok {
			return
		}
		n.namedSendFailed(f.event())
	}
}

// takeEvent handles one receive from the membership's events (ok false:
// the channel closed) and reports whether it was an event.
func (n *Node) takeEvent(ev MemberEvent, ok bool) bool {
	if !ok {
		n.events = nil
		return false
	}
	n.cause = cause{kind: "membership", ev: ev}
	if ev.Type == MemberSynced {
		n.gossipSynced = true
		return true
	}
	if ev.Member.ID != n.cfg.Self.ID && n.holdDeath(ev) {
		return true
	}
	n.applyMemberEvent(ev)
	return true
}

// applyMemberEvent gives a membership event to the default election and
// the named ones.
func (n *Node) applyMemberEvent(ev MemberEvent) {
	n.membershipEvent(ev)
	if ev.Member.ID != n.cfg.Self.ID {
		n.namedMemberEvent(ev)
	}
}

// process drains Ready: persist the term, then answer a pending heartbeat
// call, then send, then publish the leadership.
func (n *Node) process(reply chan election.Message, replyTo election.NodeID) {
	if n.halted() || !n.sm.HasReady() {
		if reply != nil {
			close(reply) // no answer
		}
		if n.dirty {
			n.publish()
		}
		return
	}
	rd := n.sm.Ready()
	if n.published.role == election.RoleLeader {
		if st := n.sm.Status(); st.Role != election.RoleLeader || n.leaving {
			n.withdraw() // before anything of the batch goes out, or a failed write returns
		}
	}
	if rd.Term != 0 {
		// A message may carry the new term: it must be durable first, or a
		// restart could mint it again. Send nothing of this batch, stop
		// leading and campaigning, and retry the save.
		if err := n.saveTerm(rd.Term, 0); err != nil {
			n.storeFailed(err, Persisted{Term: rd.Term, LeaderTerm: rd.LeaderTerm})
			if reply != nil {
				close(reply)
			}
			return
		}
	}
	for _, m := range rd.Messages {
		if reply != nil && m.Type == election.MsgHeartbeatResp && m.To == replyTo {
			reply <- m
			reply = nil
			continue
		}
		n.cfg.Transport.Send(m)
	}
	if reply != nil {
		close(reply)
	}
	if rd.LeaderTerm != 0 {
		// The leadership term is what this node reports: durable before it
		// is shown, so a restart never reports a lower one. It is written
		// after the messages went out, so a new leader's announcement and
		// its followers' own writes overlap with this one (a handover costs
		// one write's time, not two in a row). The term itself is durable
		// already (above), so nothing can be minted twice if this fails;
		// the node then stops leading as for any failed write.
		if len(rd.Messages) > 0 {
			yieldToSends()
		}
		if err := n.saveTerm(0, rd.LeaderTerm); err != nil {
			n.storeFailed(err, Persisted{LeaderTerm: rd.LeaderTerm})
			return
		}
	}
	n.observeReady(&rd)
	if rd.Change != nil {
		n.counters.LeaderChanges.Add(1)
		n.since = time.Now()
		n.logChange(*rd.Change)
		if ch := rd.Change; ch.Role == election.RoleFollower && ch.Leader != n.cfg.Self.ID {
			// A leader taken up on its Coordinator came over its own
			// connection: open ours now, so its crash is seen as a dropped
			// connection at once (ErrPeerDown), not by the next heartbeat
			// up to a heartbeat interval later.
			if c, ok := n.cfg.Transport.(transport.Connector); ok {
				c.Connect(ch.Leader)
			}
		}
	}
	if n.dirty || rd.Change != nil || keyOf(n.sm.Status()) != n.published {
		// Most Readies (a heartbeat answered or sent) leave what publish
		// shows as it was: rebuilding the member list for each would cost
		// O(members) allocations per heartbeat at the leader.
		n.publish()
	}
}

// peerGone handles transport.ErrPeerDown for m.To: its host refused a
// connection to its peer address twice, so its process is gone. If it is
// the leader this node follows, that is the leader's death: campaign now
// (election.EventLeaderTimeout) instead of waiting for the heartbeat
// timeout. Anyone else's death is left to gossip and timeouts, so a refused
// connection to a follower or to a stale address never deposes a leader.
func (n *Node) peerGone(m election.Message) {
	if n.halted() {
		return
	}
	st := n.sm.Status()
	if st.Role != election.RoleFollower || st.Leader != m.To || m.To == 0 {
		return
	}
	n.log.Info("the leader's host refuses connections: campaigning", "leader", uint64(m.To))
	n.sm.Observe(election.Event{Type: election.EventLeaderTimeout})
}
