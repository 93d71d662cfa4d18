package membership

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Claims over an id or a term slot. Gossip metadata is
// what a node says about itself: with the gossip key anyone can say any id
// and any start time. So:
//
//   - a term slot shared by different ids goes to the lowest id, which every
//     node computes alike (settleLocked); with Config.Prove the newcomer must
//     first prove its id, so a node without the certificate cannot take a
//     slot by claiming a low id;
//   - a second claimant of this node's own id (NotifyConflict) is refused
//     unless it proves the id; a start time decides only between two nodes
//     that both hold the id's certificate (the earlier keeps it, as without
//     peer TLS), and the proof is refused when the claimant's address leads
//     back to this node (a relay).
//
// Each refusal is logged with its reason, reported as a Conflict and counted
// (RefusedClaims).

// proofState is where a member's proof of its id stands.
type proofState uint8

const (
	proofNone    proofState = iota // not asked for
	proofPending                   // a handshake is under way
	proofOK                        // it holds a certificate for its id
	proofRefused                   // it could not prove its id
)

// proofTimeout bounds one proof; proofRetry is when a refused claimant
// still in a collision is asked again (a peer port that was not serving
// yet, a lost packet).
const proofTimeout = 5 * time.Second

var proofRetry = 10 * time.Second // a variable for tests

// RefusedClaims counts claims of an id or a term slot refused because the
// claimant could not prove its id over peer TLS.
func (m *Membership) RefusedClaims() uint64 { return m.refusedClaims.Load() }

// startProofLocked starts proving mb's id, off memberlist's goroutines;
// what is the claim ("term slot 3"), for the log. m.mu is held.
func (m *Membership) startProofLocked(mb *member, what string) {
	mb.proof = proofPending
	name, meta := mb.name, mb.meta
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), proofTimeout)
		err := m.cfg.Prove(ctx, meta.ID, meta.PeerAddr)
		cancel()
		m.proofDone(name, meta, what, err)
	}()
}

// proofDone records the outcome of a proof of a slot claimant and settles
// the slot again.
func (m *Membership) proofDone(name string, meta Meta, what string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.members[name]
	if mb == nil || mb.meta.ID != meta.ID || mb.meta.PeerAddr != meta.PeerAddr || mb.proof != proofPending {
		return // gone, or its claim changed (that starts another proof)
	}
	if err != nil {
		mb.proof = proofRefused
		m.refusedClaims.Add(1)
		if m.noteOnceLocked("claim " + name + " " + mb.addr + " " + meta.PeerAddr) {
			m.q.push(m.conflict(meta, slog.LevelError, fmt.Sprintf(
				"refused claim: node %d at %s claims %s but cannot prove id %d on its peer address: %v; it is not admitted (reason: unproven id)",
				meta.ID, mb.addr, what, meta.ID, err)))
		}
		time.AfterFunc(m.proofRetry, func() { m.retryProof(name, meta) })
	} else {
		mb.proof = proofOK
		m.log.Info("member proved its id on its peer port", "id", uint64(meta.ID), "addr", mb.addr, "peer", meta.PeerAddr)
	}
	m.q.push(m.settleLocked(slotOf(meta.ID), name)...)
}

// retryProof asks a refused claimant again, if it is still there with the
// same claim.
func (m *Membership) retryProof(name string, meta Meta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.members[name]
	if mb == nil || mb.meta.ID != meta.ID || mb.meta.PeerAddr != meta.PeerAddr || mb.proof != proofRefused {
		return
	}
	mb.proof = proofNone
	m.q.push(m.settleLocked(slotOf(meta.ID), "")...)
}

// noteOnceLocked reports whether key was not noted within conflictRepeat,
// and notes it. m.mu is held.
func (m *Membership) noteOnceLocked(key string) bool {
	now := time.Now()
	if t, ok := m.conflicts[key]; ok && now.Sub(t) < conflictRepeat {
		return false
	}
	m.conflicts[key] = now
	return true
}

// proveSameID settles a claim of this node's own id by another node, whose
// metadata is w, gossiping from oa. Run on its own goroutine.
func (m *Membership) proveSameID(w wireMeta, oa, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), proofTimeout)
	err := m.cfg.Prove(ctx, w.ID, w.PeerAddr)
	cancel()
	var ev Event
	switch {
	case err != nil:
		m.refusedClaims.Add(1)
		ev = m.conflict(w.Meta, slog.LevelError, fmt.Sprintf(
			"refused claim: a node at %s claims this node's id %d (and reports a start at %s) but cannot prove the id on its peer address: %v; this node keeps its id and role (reason: unproven id)",
			oa, w.ID, time.Unix(0, w.Since).UTC().Format(time.RFC3339Nano), err))
	case w.Since <= m.since:
		ev = m.conflict(w.Meta, slog.LevelError, detail+
			"; the other proved the id on its peer port (it holds this node's certificate) and started first, so this node stands down")
		ev.Yield = true
	default:
		ev = m.conflict(w.Meta, slog.LevelError, detail+
			"; the other proved the id on its peer port (it holds this node's certificate) and started later: it stands down, this node keeps the id")
	}
	m.q.push(ev)
}
