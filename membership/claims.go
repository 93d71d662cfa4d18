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
//     node computes alike (settleLocked); with Config.Prove only members that
//     proved their id count (proofs.go), so a node without the certificate
//     cannot take a slot by claiming a low id;
//   - a second claimant of this node's own id (NotifyConflict) is refused
//     unless it proves the id; a start time decides only between two nodes
//     that both hold the id's certificate (the earlier keeps it, as without
//     peer TLS), and the proof is refused when the claimant's address leads
//     back to this node (a relay).
//
// Each refusal is logged with its reason, reported as a Conflict and counted
// (RefusedClaims).

// noteOnceLocked reports whether key was not noted within conflictRepeat,
// and notes it; notes older than that are dropped once there are many (a
// party with the gossip key can make up any number of names). m.mu is held.
func (m *Membership) noteOnceLocked(key string) bool {
	now := time.Now()
	if t, ok := m.conflicts[key]; ok && now.Sub(t) < conflictRepeat {
		return false
	}
	if len(m.conflicts) > 1000 {
		for k, t := range m.conflicts {
			if now.Sub(t) >= conflictRepeat {
				delete(m.conflicts, k)
			}
		}
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
