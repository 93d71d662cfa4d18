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
//     (GossipToTheDeadTime) and reported at Warn level.
//   - Same slot, different ids: of the live nodes with one slot, the one that
//     started first (its start time travels in the metadata; ties go to the
//     lower id) keeps it. A later one gets a Conflict instead of a Join, is
//     not listed by Members, and so is never elected while the first one is
//     alive; when the first one leaves or dies, the later one takes the slot
//     and gets its Join then. A node that learns of both at once (joining a
//     cluster that already has the collision) may see the later one Join
//     first; when the earlier one shows up, the later one gets a Conflict
//     and a Dead. A node that is itself the later one gets a Conflict about
//     itself: the others ignore it, and it must not lead.
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
)

func (t EventType) String() string {
	return [...]string{"?", "join", "update", "leave", "dead", "conflict"}[t]
}

// Event is one change in membership.
type Event struct {
	Type   EventType
	Member Meta
	// Yield is set on a Conflict that says this node is the later holder of
	// its id or of its term slot: it must not take part in elections.
	Yield bool
	// Detail explains a Conflict.
	Detail string
}
