// Package membership tracks which nodes are alive with gossip
// (hashicorp/memberlist) and reports joins, leaves and deaths as events.
//
// Each node gossips under its decimal id as memberlist's node name, with its
// Meta as JSON node metadata (at most memberlist.MetaMaxSize bytes). Events
// are about the other nodes only: Join when one becomes alive, Update when
// its Meta changes, Leave when it left cleanly (Membership.Leave), Dead when
// gossip declared it dead (a crash, a Shutdown without Leave, a partition),
// and Conflict for the problems below. Events are never dropped while the
// Membership runs, and memberlist never waits for the reader.
//
// # Proofs
//
// With Config.Prove (peer TLS), a node seen alive in gossip gets its Join
// only once it proved its id on the peer address it gossips; until then it
// is pending, not listed by Members, and takes no part in settling a term
// slot. A member whose addresses or reported start change is proved again
// and keeps the metadata it proved until then (see proofs.go).
//
// # Duplicates
//
// Node ids must be unique, and so must their low election.SlotBits bits: a
// term embeds those bits (its slot) to name the only node that may lead in
// it, so two live nodes with the same slot could mint the same term. Both
// mistakes are reported loudly (a Conflict event and an Error log) on every
// node that sees them:
//
//   - Same id: memberlist keeps the first node it knew under that name and
//     ignores the other (its ConflictDelegate); the Conflict's Detail names
//     both addresses. A node restarted at a new address before the others
//     forgot its dead predecessor is refused the same way for a while
//     (GossipToTheDeadTime) and reported at Warn level. When the other
//     claims this node's own id: with Config.Prove (peer TLS) it must prove
//     the id on the peer address it gossips, or it is refused (a Conflict
//     without Yield, an Error log naming the reason, RefusedClaims); only
//     if it proves it (it holds this node's certificate, and its address
//     does not lead back here) does a start time decide: the one that
//     reports the earlier start keeps the id, the later one stands down.
//     Without Config.Prove the start time alone decides (see claims.go and
//     docs/SECURITY.md for what that leaves open).
//   - Same slot, different ids: of the live nodes with one slot, the one
//     with the lowest id keeps it, an order every node computes alike (so
//     both sides of a healed partition agree) and no node can change by
//     what it reports about itself. A higher one gets a Conflict instead of
//     a Join, is not listed by Members, and so is never elected while the
//     lower one is alive; when that one leaves or dies, the next takes the
//     slot and gets its Join then. An admitted node that a lower one
//     displaces gets a Conflict and a Dead. A node that is itself displaced
//     gets a Conflict about itself (Yield): the others ignore it, and it
//     must not lead. With Config.Prove only proven members take part: a
//     node without the certificate cannot take a slot by claiming a low id.
//   - A node whose metadata cannot be decoded, or names another id, is
//     reported as a Conflict and never joins.
//
// # Leave and Dead
//
// memberlist v0.7.0 tells NotifyLeave nothing about why a node went
// (hashicorp/memberlist#293: Node.State is never filled in), so Leave first
// gossips a "leaving" flag in the node's metadata, waits for it to spread,
// then leaves. A node that saw the flag reports Leave; one that missed it
// reports Dead.
package membership

import (
	"github.com/electord/electord/election"
)

// Meta is what a node tells the cluster about itself through gossip.
type Meta struct {
	ID       election.NodeID `json:"id"`
	Name     string          `json:"name"`
	Priority int64           `json:"priority"`
	PeerAddr string          `json:"peer"`
	APIAddr  string          `json:"api"`
	HTTPAddr string          `json:"http"`
}

// EventType is the kind of a membership event.
type EventType uint8

const (
	// Join: a member is alive (new, or back).
	Join EventType = iota + 1
	// Update: a live member changed its metadata.
	Update
	// Leave: a member left cleanly.
	Leave
	// Dead: gossip declared a member dead.
	Dead
	// Conflict: another node claims this node's id (or its term slot).
	Conflict
	// Synced: RetryJoin's first attempt has ended, joined or not. Every
	// member that attempt learnt of (and whose claim needed no proof) was
	// reported before it, so a reader that has taken it has the view gossip
	// had when the node started. Reported once, with no Member.
	Synced
)

func (t EventType) String() string {
	return [...]string{"?", "join", "update", "leave", "dead", "conflict", "synced"}[t]
}

// Event is one change in membership.
type Event struct {
	Type   EventType
	Member Meta
	// Yield is set on a Conflict that says this node lost its id (to a
	// claimant that proved it and started first) or its term slot (to a
	// lower id): it must not take part in elections.
	Yield bool
	// Detail explains a Conflict.
	Detail string
}
