package node

import (
	"slices"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// The named elections' Ready: each loop pass drains the machines that have
// something to say as one batch, terms durable before messages, leadership
// terms durable before they are shown (see drainNamed).

// processNamed drains the Ready of name's machine at once (see
// drainNamed), before the machine is dropped.
func (n *Node) processNamed(name string) {
	n.drainNamed([]string{name})
}

// namedReady is one machine's Ready in a batch.
type namedReady struct {
	name string
	nm   *namedMachine
	rd   election.Ready
}

// replyKey names a Heartbeat call waiting for its answer: the election and
// the caller.
type replyKey struct {
	name string
	to   election.NodeID
}

// awaitReply keeps a named Heartbeat's reply channel until the drain of the
// loop pass that stepped it: the machine's answer goes there, not by a
// message of its own (afterNamed closes the channels left unanswered).
func (n *Node) awaitReply(name string, to election.NodeID, ch chan election.Message) {
	if n.named.replies == nil {
		n.named.replies = map[replyKey][]chan election.Message{}
	}
	k := replyKey{name, to}
	n.named.replies[k] = append(n.named.replies[k], ch)
}

// answer gives m, a HeartbeatResp, to the call waiting for it, if one is.
func (n *Node) answer(m election.Message) bool {
	k := replyKey{m.Election, m.To}
	chs := n.named.replies[k]
	if len(chs) == 0 {
		return false
	}
	chs[0] <- m
	if len(chs) == 1 {
		delete(n.named.replies, k)
	} else {
		n.named.replies[k] = chs[1:]
	}
	return true
}

// closeReplies ends the calls no drain answered.
func (n *Node) closeReplies() {
	for k, chs := range n.named.replies {
		for _, ch := range chs {
			close(ch)
		}
		delete(n.named.replies, k)
	}
}

// drainNamed drains the Ready of the machines of names as one batch: every
// term is durable before any of the batch's messages goes out, in one write
// however many elections moved past their reserve; then the messages go
// (a Heartbeat's answer to its waiting call); then the leadership terms are
// durable (one write) before any change is shown or announced.
func (n *Node) drainNamed(names []string) {
	if n.halted() {
		return
	}
	batch := make([]namedReady, 0, len(names))
	for _, name := range names {
		if nm := n.named.machines[name]; nm != nil && nm.sm.HasReady() {
			rd := nm.sm.Ready()
			if rd.Term != 0 {
				n.named.store.Ask(name, rd.Term, 0)
			}
			batch = append(batch, namedReady{name, nm, rd})
		}
	}
	// A leadership that ended is shown ended before anything of the batch
	// goes out: a handover's TimeoutNow lets the successor claim as soon as
	// it arrives, and two nodes must never both say they lead. (The default
	// election withdraws before its batch in the same way.)
	for _, b := range batch {
		if n.showsSelfLeading(b.name) && b.nm.sm.Status().Role != election.RoleLeader {
			n.publishNamed(b.name)
		}
	}
	// If none of the batch's new terms is durable, the machines that
	// minted or took one stop here, before anything carries it.
	batch = n.flushNamed(batch, func(rd election.Ready) bool { return rd.Term != 0 })
	for _, b := range batch {
		for _, m := range b.rd.Messages {
			m.Election = b.name
			if m.Type == election.MsgHeartbeatResp && n.answer(m) {
				continue
			}
			n.cfg.Transport.Send(m)
		}
		if b.rd.LeaderTerm != 0 {
			n.named.store.Ask(b.name, 0, b.rd.LeaderTerm)
		}
	}
	if n.named.store.Dirty() {
		yieldToSends()
	}
	batch = n.flushNamed(batch, func(rd election.Ready) bool { return rd.LeaderTerm != 0 })
	for _, b := range batch {
		if b.rd.Change != nil {
			n.named.touch(b.name) // shown, however quietly it was touched
			n.namedChange(b.name, b.nm, *b.rd.Change)
		}
	}
	n.named.changes.flush(n.log)
}

// flushNamed makes the batch's asked terms durable; if it cannot, the
// machines whose Ready asked (asked says which) stop, and the rest of the
// batch is returned.
func (n *Node) flushNamed(batch []namedReady, asked func(election.Ready) bool) []namedReady {
	err := n.named.store.Flush()
	if err == nil {
		return batch
	}
	return slices.DeleteFunc(batch, func(b namedReady) bool {
		if asked(b.rd) {
			n.namedStoreFailed(b.name, err)
			return true
		}
		return false
	})
}

// namedChange handles a named election's new leadership: logged (with the
// pass's others, named_changelog.go), the new leader connected to (its
// crash is then seen at once), and observers told when this node starts or
// stops leading.
func (n *Node) namedChange(name string, nm *namedMachine, ch election.Leadership) {
	n.named.rebalanceStale()
	nm.since = time.Now()
	n.named.changes.add(name, ch)
	if ch.Role == election.RoleFollower && ch.Leader != n.cfg.Self.ID {
		if c, ok := n.cfg.Transport.(transport.Connector); ok {
			c.Connect(ch.Leader)
		}
	}
	was := nm.reported.Role == election.RoleLeader
	nm.reported = ch
	n.named.own.restand(name) // the leader's term and since are in its stand
	if was || ch.Role == election.RoleLeader {
		n.sendCandidacy(name, 0) // observers learn who leads from the leader's word
	}
}

// namedStoreFailed: a named election's term could not be written. That
// election's machine stops (a leadership it held ends here, and peers hear
// this node withdrew from it), before anything carrying the term leaves.
// Its apps stay queued, told there is no leader; the node stands for them
// again when one campaigns anew (no retry timer yet). The default election
// is not touched.
func (n *Node) namedStoreFailed(name string, err error) {
	n.counters.PersistErrors.Add(1)
	n.log.Error("named election: cannot persist its term; not standing in it", "election", name, "err", err)
	n.forgetMachine(name)
	n.sendToMembers(n.notStanding(name), 0)
}

// afterNamed runs after each loop iteration: it drains, as one batch, the
// machines the iteration touched that have something to say, and publishes
// the elections that changed. Every call that can give a machine a Ready
// (a Step, an Observe, a command, a due Tick) marks its election dirty, so
// the elections the iteration did not touch cost it nothing; those touched
// only by their machines' heartbeats and ticks are drained but, in plain
// mode, published only when the drain finds a leadership change (at rest,
// most of a pass's elections: touchQuiet).
func (n *Node) afterNamed() {
	n.rebalanceNamed() // its handovers drain with the pass
	var ready []string
	for name := range n.named.dirty {
		if nm := n.named.machines[name]; nm != nil && nm.sm.HasReady() {
			ready = append(ready, name)
		}
	}
	if len(ready) > 0 {
		n.drainNamed(ready)
	}
	n.closeReplies()
	for name := range n.named.dirty {
		if _, quiet := n.named.quiet[name]; !quiet {
			n.publishNamed(name)
			n.refusesNamedElections(name)
		}
	}
	n.named.noteDues()
	n.named.untouch()
	n.resendNamed()
	n.beatPairs()
	if n.named.clock != nil {
		n.named.clock.arm()
	}
}

// showsSelfLeading reports whether what readers see of name says this node
// leads it.
func (n *Node) showsSelfLeading(name string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.elections[name].Leader.Self
}
