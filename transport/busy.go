package transport

import (
	"time"

	"github.com/electord/electord/election"
)

// A peer whose inbox is full refuses what it is sent as overloaded. Its
// named messages are sent again rather than lost: a mass failover bursts
// more at a node than its inbox holds (4,096), and lost, a ring election's
// announcement cost it a backed-off round, 0.9-7.5 s at 2,000 elections.
// The refused messages wait in the peer's set for its next named call,
// ahead of what was queued since (namedSet.pushBack), and that call waits a
// pause that doubles while the peer keeps refusing; the default election's
// messages do not wait. A peer that has refused for busyGiveUp loses what
// it refuses after that, as before: its node is wedged, and the elections'
// timers decide.

// busyPause is the first pause after a refusal, about what a busy node's
// loop takes to step a call's worth of messages (maxCall) from its inbox;
// busyPauseMax the longest.
const (
	busyPause    = 5 * time.Millisecond
	busyPauseMax = 80 * time.Millisecond
	busyGiveUp   = time.Second
)

// busyState is a peer's run of overload refusals, owned by the peer's
// goroutine (the calls that get the refusals run on it).
type busyState struct {
	since   time.Time     // the first refusal of the run (zero: none)
	pause   time.Duration // the pause after the last refusal
	until   time.Time     // the next named call waits until then
	refused int           // refusals in the current call (takeNamed)
}

// retriesBusy says whether m, refused by its peer as overloaded, is sent
// again (busy): a named message, except an Election, whose refusal its
// election takes as the busy peer's answer (election.EventPeerBusy: the
// bully waits for that peer's announcement, the ring passes the token on
// to the next member).
func retriesBusy(m election.Message) bool {
	return forNamedSet(m) && m.Type != election.MsgElection
}

// busy: peer id refused named messages ms as overloaded. Called on the
// peer's goroutine, from the call that was refused.
func (q *sendQueues) busy(id election.NodeID, ms []election.Message) {
	if len(ms) == 0 {
		return
	}
	q.mu.RLock()
	p := q.peers[id]
	q.mu.RUnlock()
	if p == nil {
		for _, m := range ms {
			q.count(m)
		}
		return
	}
	b, now := &p.busy, time.Now()
	b.refused += len(ms)
	if b.since.IsZero() {
		b.since, b.pause = now, busyPause
	} else {
		b.pause = min(2*b.pause, busyPauseMax)
	}
	b.until = now.Add(b.pause)
	lost := ms // wedged: lost on the way
	if now.Sub(b.since) <= busyGiveUp {
		lost = p.named.pushBack(ms)
	}
	for _, m := range lost {
		q.count(m)
	}
}
