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
// stands in, as its Candidacies say it (standingIn), counted once a period:
// every member's digest of the period is compared with it. A change since
// it was counted was sent to the members too, so at worst one period's
// comparison misses a lost copy (the next finds it) or finds a difference
// that is not there (a round too many).
func (n *Node) ownDigest() uint64 {
	r := &n.named.resend
	if r.ownIn == r.period+1 {
		return r.own
	}
	var d named.Digest
	for name, head := range n.named.queues.Heads() {
		if nm := n.named.machines[name]; nm != nil { // standsIn
			d.Add(name, headStand(head, nm))
		}
	}
	r.own, r.ownIn = d.Sum(), r.period+1
	return r.own
}
