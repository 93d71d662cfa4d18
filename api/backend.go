// Package api serves the client-facing API: the gRPC Elector service and
// the sidecar HTTP endpoint.
package api

import (
	"context"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// Subscription is a stream of leadership changes. C is closed when the
// subscription ends. A slow reader loses events, never blocks the node:
// Dropped counts what it lost, and the newest state is always delivered.
type Subscription interface {
	C() <-chan node.LeaderInfo
	Dropped() uint64
	Close()
}

// Backend is what the API serves: one node. Methods are safe for
// concurrent use. Kill and Revive of an id other than Self are forwarded by
// the API to that member's api address; Resign and Transfer are forwarded
// to the leader's api address when this node does not lead, so Transfer is
// called on the leader (with any member's id).
type Backend interface {
	Self() election.NodeID
	Leader() node.LeaderInfo
	// Subscribe opens a watch; see LimitWatchers for the error a bounded
	// backend returns.
	Subscribe() (Subscription, error)
	Status() node.StatusInfo
	Members() []node.MemberInfo
	// Kill makes this node crash-stop as its peers see it: it stops
	// answering peers and leaves gossip; the process stays up.
	Kill(ctx context.Context) error
	// Revive undoes Kill: the node restarts from its persisted term.
	Revive(ctx context.Context) error
	// Resign steps down if this node leads (node.ErrNotLeader otherwise).
	Resign(ctx context.Context) error
	// Transfer hands leadership to id; this node must lead.
	Transfer(ctx context.Context, id election.NodeID) error
	// Exit terminates the process (electctl kill --exit).
	Exit()
}
