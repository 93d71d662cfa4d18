package membership

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// conflictRepeat is how often the same duplicate-id conflict (same id, same
// two addresses) is reported again: memberlist calls NotifyConflict for
// every gossip message that carries it.
const conflictRepeat = time.Minute

// delegate receives memberlist's callbacks. It is a separate type so that
// Membership's method set stays ours. memberlist calls the Notify methods
// with its node lock held: they only update m's view and queue events.
type delegate struct{ m *Membership }

// NodeMeta implements memberlist.Delegate.
func (d delegate) NodeMeta(limit int) []byte {
	m := d.m
	m.metaMu.Lock()
	st := m.cfg.Settings
	b := wireMeta{Meta: m.meta, Since: m.since, Leaving: m.leaving, Settings: &st}.encode()
	m.metaMu.Unlock()
	if len(b) > limit { // Validate and SetMeta check this
		m.log.Error("node metadata over the gossip limit; sending none", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

// NotifyMsg implements memberlist.Delegate; no user messages are sent.
func (delegate) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin implements memberlist.EventDelegate: n is alive, new or back.
func (d delegate) NotifyJoin(n *memberlist.Node) {
	m := d.m
	if n.Name == m.name {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.q.push(m.joinLocked(n)...)
}

// NotifyUpdate implements memberlist.EventDelegate: n's metadata changed.
func (d delegate) NotifyUpdate(n *memberlist.Node) {
	m := d.m
	if n.Name == m.name {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.members[n.Name]
	if mb == nil {
		m.q.push(m.joinLocked(n)...)
		return
	}
	wasValid, oldClaim := mb.valid, mb.claim()
	mb.addr = n.Address()
	m.noteAliveLocked(n.Name, mb.addr)
	w, err := m.metas.decode(n)
	if err != nil {
		if mb.valid && !mb.badNoted {
			mb.badNoted = true
			m.q.push(m.conflict(mb.meta, slog.LevelError, fmt.Sprintf(
				"node %s at %s gossiped metadata that cannot be used (%v); its previous metadata is kept", n.Name, mb.addr, err)))
		}
		if mb.valid && mb.claim() != oldClaim { // its gossip address moved
			m.reclaimLocked(mb)
			m.q.push(m.settleLocked(slotOf(mb.meta.ID), "")...)
		}
		return
	}
	mb.badNoted = false
	mb.valid, mb.meta, mb.since, mb.leaving = true, w.Meta, w.Since, w.Leaving
	changed := mb.claim() != oldClaim
	if changed {
		m.reclaimLocked(mb) // a new claim proves itself again (proofs.go)
	}
	var evs []Event
	switch {
	case !wasValid:
		evs = m.settleLocked(slotOf(w.ID), n.Name)
	case changed:
		evs = m.settleLocked(slotOf(w.ID), "")
	}
	// An admitted member's new metadata is reported once its claim is
	// proven (at once without proofs); until then the node keeps what it
	// was told.
	if mb.admitted && mb.shown != w.Meta && (m.cfg.Prove == nil || mb.proof == proofOK) {
		mb.shown = w.Meta
		evs = append(evs, Event{Type: Update, Member: w.Meta})
	}
	m.q.push(evs...)
}

// NotifyLeave implements memberlist.EventDelegate: n left or died.
func (d delegate) NotifyLeave(n *memberlist.Node) {
	m := d.m
	if n.Name == m.name {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.members[n.Name]
	if mb == nil {
		return
	}
	delete(m.members, n.Name)
	if !mb.valid {
		return
	}
	var evs []Event
	if mb.admitted {
		// n.State is always StateAlive here in memberlist v0.7.0 (#293), so
		// the "leaving" flag is what tells a leave; StateLeft is honored
		// should memberlist start filling it in.
		typ := Dead
		if n.State == memberlist.StateLeft || (mb.leaving && n.State != memberlist.StateDead) {
			typ = Leave
		}
		evs = append(evs, Event{Type: typ, Member: mb.shown})
		m.log.Info("member gone", "id", n.Name, "addr", mb.addr, "how", typ.String())
	}
	evs = append(evs, m.settleLocked(slotOf(mb.meta.ID), "")...)
	m.q.push(evs...)
}

// NotifyConflict implements memberlist.ConflictDelegate: a node named like
// existing (same id) gossips from another address. memberlist keeps
// existing and ignores other.
func (d delegate) NotifyConflict(existing, other *memberlist.Node) {
	m := d.m
	ea, oa := existing.Address(), other.Address()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.noteOnceLocked(existing.Name + " " + ea + " " + oa) {
		return
	}

	who := Meta{ID: nameID(other.Name)}
	if w, err := m.metas.decode(other); err == nil {
		who = w.Meta
	}
	var detail string
	level := slog.LevelError
	yield := false
	switch {
	case existing.Name == m.name:
		detail = fmt.Sprintf("duplicate node id %s: claimed by this node at %s and by another node at %s; gossip ignores the other one, but both run with this id",
			existing.Name, ea, oa)
		w, err := m.metas.decode(other)
		if err != nil {
			break
		}
		if m.cfg.Prove != nil {
			// A start time the other reports about itself decides nothing
			// until it proved the id on its peer port (claims.go).
			go m.proveSameID(w, oa, detail)
			return
		}
		// Without proofs (no peer TLS) the one that reports the later start
		// stands down (ties: neither can tell, both do).
		if w.Since <= m.since {
			yield = true
			detail += "; the other reports that it started first, so this node stands down (without peer TLS nothing proves that)"
		}
	case m.members[existing.Name] != nil:
		detail = fmt.Sprintf("duplicate node id %s: claimed by the member at %s and by another node at %s, which gossip ignores",
			existing.Name, ea, oa)
	default:
		// memberlist refuses a new address for a name it still remembers as
		// dead (not for one that left): most likely a restart elsewhere.
		level = slog.LevelWarn
		detail = fmt.Sprintf("node id %s at %s is refused: gossip still remembers id %s at %s, which is dead; a restarted node is accepted once that is forgotten (after %v), a second node with the id never",
			existing.Name, oa, existing.Name, ea, m.deadTime)
	}
	ev := m.conflict(who, level, detail)
	ev.Yield = yield
	m.q.push(ev)
}

// joinLocked handles a node that became alive.
func (m *Membership) joinLocked(n *memberlist.Node) []Event {
	mb := &member{name: n.Name, addr: n.Address()}
	m.members[n.Name] = mb
	m.noteAliveLocked(n.Name, mb.addr)
	w, err := m.metas.decode(n)
	if err != nil {
		return []Event{m.conflict(Meta{ID: nameID(n.Name)}, slog.LevelError, fmt.Sprintf(
			"node %q at %s gossiped metadata that cannot be used (%v); it is ignored and never elected", n.Name, mb.addr, err))}
	}
	mb.valid, mb.meta, mb.since, mb.leaving = true, w.Meta, w.Since, w.Leaving
	return m.settleLocked(slotOf(w.ID), n.Name)
}

// candidate is a live node (possibly this one) holding a term slot.
type candidate struct {
	id election.NodeID
	mb *member // nil: this node
}

// settleLocked gives term slot s to the live node with the lowest id (this
// node included), an order every node computes alike from ids alone, and
// reports what changed: Conflict for a newcomer that does not get the slot,
// Conflict and Dead for an admitted node that loses it, Join for a node
// that gets it. newcomer is the gossip name of a node just seen, or "".
//
// With Config.Prove only members that proved their id take part (see
// proofs.go): a node not yet admitted counts once its current claim is
// proven (its proof is started here), an admitted one keeps counting with
// the claim it proved.
func (m *Membership) settleLocked(slot uint64, newcomer string) []Event {
	var cands []candidate
	for _, mb := range m.members {
		if !mb.valid || slotOf(mb.meta.ID) != slot {
			continue
		}
		if m.cfg.Prove != nil && mb.proof == proofNone {
			m.startProofLocked(mb)
		}
		if m.counts(mb) {
			cands = append(cands, candidate{mb.meta.ID, mb})
		}
	}
	selfIn := slotOf(m.cfg.Self.ID) == slot
	if selfIn {
		cands = append(cands, candidate{m.cfg.Self.ID, nil})
	}
	if len(cands) == 0 {
		return nil
	}
	var conflicts, deads, joins []Event
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.id, b.id) })
	owner := cands[0]
	ownerDesc := "this node"
	if owner.mb != nil {
		ownerDesc = fmt.Sprintf("node %d at %s", owner.id, owner.mb.addr)
	}
	for _, c := range cands[1:] {
		if c.mb == nil {
			continue
		}
		switch {
		case c.mb.admitted:
			c.mb.admitted = false
			conflicts = append(conflicts, m.conflict(c.mb.shown, slog.LevelError, fmt.Sprintf(
				"term slot collision: node %d at %s and %s both have term slot %d, the low %d bits of their ids; the lower id keeps the slot, so node %d is withdrawn (reported dead) and is not elected while %s is alive",
				c.id, c.mb.addr, ownerDesc, slot, election.SlotBits, c.id, ownerDesc)))
			deads = append(deads, Event{Type: Dead, Member: c.mb.shown})
		case c.mb.name == newcomer:
			conflicts = append(conflicts, m.conflict(c.mb.meta, slog.LevelError, fmt.Sprintf(
				"term slot collision: node %d at %s has term slot %d, the low %d bits of its id, like %s, whose id is lower and keeps the slot; node %d is not admitted as a member and is not elected while %s is alive",
				c.id, c.mb.addr, slot, election.SlotBits, ownerDesc, c.id, ownerDesc)))
		}
	}
	if owner.mb != nil && !owner.mb.admitted {
		owner.mb.admitted, owner.mb.shown = true, owner.mb.meta
		joins = append(joins, Event{Type: Join, Member: owner.mb.meta})
		if selfIn {
			ev := m.conflict(owner.mb.meta, slog.LevelError, fmt.Sprintf(
				"term slot collision: this node (id %d) has term slot %d, the low %d bits of its id, like node %d at %s, whose id is lower and keeps the slot; the others do not admit this node, and it must not lead (give it an id whose low %d bits no other node has)",
				m.cfg.Self.ID, slot, election.SlotBits, owner.id, owner.mb.addr, election.SlotBits))
			ev.Yield = true
			conflicts = append(conflicts, ev)
		} else if len(cands) > 1 {
			m.log.Warn("member takes over a term slot", "id", owner.id, "slot", slot, "addr", owner.mb.addr)
		}
	}
	return slices.Concat(conflicts, deads, joins)
}

// conflict logs a Conflict event and returns it.
func (m *Membership) conflict(who Meta, level slog.Level, detail string) Event {
	m.log.Log(context.Background(), level, "membership conflict", "id", uint64(who.ID), "detail", detail)
	return Event{Type: Conflict, Member: who, Detail: detail}
}
