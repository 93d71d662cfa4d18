package node

import (
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// The digests of the candidacies' anti-entropy (named_resend.go): once a
// period a node tells every live member what it holds of that member's
// candidacies, in one number, and a member whose own digest of its
// standing differs sends it a round.

// sendHeldDigests sends every live member the digest of its candidacies
// as this node holds them, and wants a round for each member that sent no
// digest itself in the last digestLapse periods (an older node; one this
// node has not heard one from yet: a member that joined or restarted
// since; or one whose digests stopped: lost on the way, or its clock
// stopped with nothing held, so that copies lost to it since would never
// be repaired), except at this node's first period. Then no member could
// have sent one yet if they started together, as a cluster's nodes and
// apps do: a round to each was every candidacy again to every member (at
// 10,000 elections, 40,000 copies per node) as they started. A node that
// starts in a running cluster has most members' digests by then; one it
// has not heard from gets its round a period later, and a digest that
// differs gets one at once.
func (n *Node) sendHeldDigests() {
	r := &n.named.resend
	if r.want == nil {
		r.want = map[election.NodeID]bool{}
	}
	held := n.named.table.Digests()
	for id, rec := range n.members {
		if !rec.alive || id == n.cfg.Self.ID {
			continue
		}
		d, ok := held[id]
		if !ok {
			d = named.Digest{}.Sum() // holds none of them
		}
		m := n.notStanding("")
		m.To, m.Held = id, d
		n.cfg.Transport.Send(m)
		if last, ok := r.digesters[id]; (!ok || r.period-last > digestLapse) && r.period > 1 {
			r.want[id] = true
		}
	}
}

// digestLapse: a member whose last digest came more than this many periods
// ago gets a round every period until one comes. Each member sends one a
// period, so one lands between any two of this node's periods but for a
// stall or a loss; two periods without one is not the jitter of two clocks.
const digestLapse = 2

// heldDigestFrom takes a peer's digest of this node's candidacies (a
// Candidacy of no election; Held 0: it said none), and wants a round for
// the peer when the digest differs from this node's own.
func (n *Node) heldDigestFrom(m election.Message) {
	if m.Held == 0 || n.halted() {
		return
	}
	r := &n.named.resend
	if r.digesters == nil {
		r.digesters = map[election.NodeID]uint64{}
	}
	if r.want == nil {
		r.want = map[election.NodeID]bool{}
	}
	r.digests++
	r.digesters[m.From] = r.period
	if m.Held != n.ownDigest() {
		r.differed++
		r.want[m.From] = true
	}
}

// ownDigest is the digest of this node's standing in every election it
// stands in, as its Candidacies say it (standingIn): every member's digest
// of the period is compared with it. It is kept as the standing changes
// (ownStanding), so a comparison costs the elections changed since the
// last one, not every election.
func (n *Node) ownDigest() uint64 {
	o := &n.named.own
	for name := range o.stale {
		o.count(name, n.named.machines[name], &n.named.queues)
	}
	if len(o.stale) > untouchedRoom {
		o.stale = nil // a map keeps its largest room, and ranging costs it
	} else {
		clear(o.stale)
	}
	return o.d.Sum()
}

// ownStanding is this node's digest of its own standing: one part per
// election where it runs a machine and has a candidacy at the head of its
// queue, headStand's hash, kept in the machine (namedMachine.ownHash).
// The rule: whatever changes a part (the queue's head, the machine's
// reported leadership and its since) marks the election stale before the
// loop next compares digests, and ownDigest counts the stale parts again.
// A candidacy added, withdrawn or changed and a machine started are
// touched (namedState.touch), a new leadership is reported in namedChange;
// both mark it. A machine that stops uncounts its part at once (uncount),
// as nothing is left to count it from. Only elections with a running
// machine are marked, and a stopped one is unmarked, so the stale set
// never holds more than the machines, however long no digest comes to
// compare with.
type ownStanding struct {
	d     named.Digest
	stale map[string]struct{}
}

// restand marks name's part stale.
func (o *ownStanding) restand(name string) {
	if o.stale == nil {
		o.stale = map[string]struct{}{}
	}
	o.stale[name] = struct{}{}
}

// uncount removes nm's part (nm: a machine of the election, or nil).
func (o *ownStanding) uncount(nm *namedMachine) {
	if nm != nil && nm.owned {
		o.d.RemoveHash(nm.ownHash)
		nm.ownHash, nm.owned = 0, false
	}
}

// stop uncounts nm, name's machine about to stop or be replaced (or nil),
// and unmarks name.
func (o *ownStanding) stop(name string, nm *namedMachine) {
	o.uncount(nm)
	delete(o.stale, name)
}

// count counts name's part again: nm, its machine (nil: none runs, and
// its part was uncounted when it stopped), stands for qs's head.
func (o *ownStanding) count(name string, nm *namedMachine, qs *named.Queues) {
	if nm == nil {
		return
	}
	o.uncount(nm)
	if head, ok := qs.Head(name); ok {
		nm.ownHash, nm.owned = named.StandHash(name, headStand(head, nm)), true
		o.d.AddHash(nm.ownHash)
	}
}
