// Package membership tracks which nodes are alive with gossip
// (hashicorp/memberlist) and reports joins, leaves and deaths as events.
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
	// Detail explains a Conflict.
	Detail string
}
