package node

import (
	"time"

	"github.com/electord/electord/election"
)

// Membership is what the loop needs from gossip: who joins, changes, leaves
// or dies, and a way to leave. The node does not care how it is done; the
// daemon adapts the memberlist-based membership package to it, and tests use
// an in-memory twin.
type Membership interface {
	// Events reports changes of the other nodes, in order. Sending on it
	// must never wait on anything but the reader, and no event may be lost
	// while the Membership runs. It is closed (or simply stops) after
	// Shutdown.
	Events() <-chan MemberEvent
	// Leave announces that this node leaves, so that the others report
	// MemberLeave rather than MemberDead, waiting up to timeout.
	Leave(timeout time.Duration) error
	// Shutdown stops gossip; without Leave first the others report
	// MemberDead. The node calls it once per Membership.
	Shutdown() error
}

// SyncReporter is a Membership that reports MemberSynced once its first
// join attempt has ended. Until a node has taken that event it does not
// let a named election campaign at once on the ground that no live node
// outranks it (firstWait): the members it has not heard of yet might. A
// Membership that is not one is taken to be synced from the start.
type SyncReporter interface {
	Membership
	ReportsSynced()
}

// Meta is what a node tells the cluster about itself.
type Meta struct {
	ID       election.NodeID
	Name     string
	Priority int64
	PeerAddr string
	APIAddr  string
	HTTPAddr string
}

// MemberEventType is the kind of a MemberEvent.
type MemberEventType uint8

const (
	// MemberJoin: a member is alive (new, or back).
	MemberJoin MemberEventType = iota + 1
	// MemberUpdate: a live member changed its Meta.
	MemberUpdate
	// MemberLeave: a member left cleanly.
	MemberLeave
	// MemberDead: gossip declared a member dead.
	MemberDead
	// MemberConflict: another node claims a node's id (or its term slot).
	MemberConflict
	// MemberSynced: the first join attempt has ended; every member it
	// learnt of was reported before it (see SyncReporter). No Member.
	MemberSynced
)

func (t MemberEventType) String() string {
	switch t {
	case MemberJoin:
		return "join"
	case MemberUpdate:
		return "update"
	case MemberLeave:
		return "leave"
	case MemberDead:
		return "dead"
	case MemberConflict:
		return "conflict"
	case MemberSynced:
		return "synced"
	}
	return "?"
}

// MemberEvent is one change in membership.
type MemberEvent struct {
	Type   MemberEventType
	Member Meta
	// Yield is set on a MemberConflict that says this node is the later
	// holder of its id or of its term slot: it must not take part in
	// elections.
	Yield bool
	// Detail explains a MemberConflict.
	Detail string
}
