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

// processNamed drains the Ready of name's machine (see drainNamed). reply,
// when not nil, takes its answer to replyTo's heartbeat.
func (n *Node) processNamed(name string, reply chan election.Message, replyTo election.NodeID) {
	n.drainNamed([]string{name}, reply, replyTo)
}

// namedReady is one machine's Ready in a batch.
type namedReady struct {
	name string
	nm   *namedMachine
	rd   election.Ready
}

// drainNamed drains the Ready of the machines of names as one batch: every
// term is durable before any of the batch's messages goes out, in one write
// however many elections moved past their reserve; then the messages go;
// then the leadership terms are durable (one write) before any change is
// shown or announced. reply, when not nil, takes the batch's answer to
// replyTo's heartbeat.
func (n *Node) drainNamed(names []string, reply chan election.Message, replyTo election.NodeID) {
	defer func() {
		if reply != nil {
			close(reply) // no answer
		}
	}()
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
	// If none of the batch's new terms is durable, the machines that
	// minted or took one stop here, before anything carries it.
	batch = n.flushNamed(batch, func(rd election.Ready) bool { return rd.Term != 0 })
	for _, b := range batch {
		for _, m := range b.rd.Messages {
			m.Election = b.name
			if reply != nil && m.Type == election.MsgHeartbeatResp && m.To == replyTo {
				reply <- m
				reply = nil
				continue
			}
			n.cfg.Transport.Send(m)
		}
		if b.rd.LeaderTerm != 0 {
			n.named.store.Ask(b.name, 0, b.rd.LeaderTerm)
		}
	}
	batch = n.flushNamed(batch, func(rd election.Ready) bool { return rd.LeaderTerm != 0 })
	for _, b := range batch {
		n.named.dirty[b.name] = true
		if b.rd.Change != nil {
			n.namedChange(b.name, b.nm, *b.rd.Change)
		}
	}
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

// namedChange handles a named election's new leadership: logged, the new
// leader connected to (its crash is then seen at once), and observers told
// when this node starts or stops leading.
func (n *Node) namedChange(name string, nm *namedMachine, ch election.Leadership) {
	nm.since = time.Now()
	n.log.Info("named election: leadership changed", "election", name, "role", ch.Role.String(),
		"leader", uint64(ch.Leader), "term", ch.Term.String())
	if ch.Role == election.RoleFollower && ch.Leader != n.cfg.Self.ID {
		if c, ok := n.cfg.Transport.(transport.Connector); ok {
			c.Connect(ch.Leader)
		}
	}
	was := nm.reported.Role == election.RoleLeader
	nm.reported = ch
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
	m := election.Message{Type: election.MsgCandidacy, From: n.cfg.Self.ID, Election: name}
	for id, rec := range n.members {
		if rec.alive {
			m.To = id
			n.cfg.Transport.Send(m)
		}
	}
}

// afterNamed runs after each loop iteration: it drains the machines that
// have something to say and publishes the elections that changed.
func (n *Node) afterNamed() {
	var ready []string
	for name, nm := range n.named.machines {
		if nm.sm.HasReady() {
			ready = append(ready, name)
		}
	}
	if len(ready) > 0 {
		n.drainNamed(ready, nil, 0)
	}
	for name := range n.named.dirty {
		n.publishNamed(name)
	}
	clear(n.named.dirty)
	n.resendNamed()
	if n.named.clock != nil {
		n.named.clock.arm()
	}
}
