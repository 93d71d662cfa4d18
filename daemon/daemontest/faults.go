// Package daemontest holds fault hooks for tests of whole nodes: plug a
// Faults into daemon.Options.Peers (or a Network into
// devcluster.Options.Peers) and cut peer traffic at will. It is for tests
// only; production daemons run without a hook.
package daemontest

import (
	"errors"
	"sync"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// ErrBlocked is the failure a send to a blocked peer reports.
var ErrBlocked = errors.New("daemontest: peer blocked by a fault hook")

// Faults is a daemon.PeerHook that cuts one node's peer traffic to and from
// the peers it blocks, as if the network between them were cut: a send to
// a blocked peer fails with ErrBlocked, and every message from one is
// refused as a node that does not serve refuses it (transport.ErrNotServing:
// the sender sees codes.Unavailable), the requests the node's peer server
// gets and the heartbeat replies its transport gets alike. Gossip is not
// affected. The zero value blocks nothing. Safe for concurrent use.
type Faults struct {
	mu      sync.RWMutex
	blocked map[election.NodeID]bool
}

var _ daemon.PeerHook = (*Faults)(nil)

// Block cuts peer traffic to and from ids, from now on.
func (f *Faults) Block(ids ...election.NodeID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.blocked == nil {
		f.blocked = map[election.NodeID]bool{}
	}
	for _, id := range ids {
		f.blocked[id] = true
	}
}

// Unblock lifts every Block.
func (f *Faults) Unblock() {
	f.mu.Lock()
	f.blocked = nil
	f.mu.Unlock()
}

// Blocked reports whether traffic with id is cut.
func (f *Faults) Blocked(id election.NodeID) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.blocked[id]
}

// Receiver implements daemon.PeerHook: it refuses messages from blocked
// peers.
func (f *Faults) Receiver(node transport.Receiver) transport.Receiver {
	return faultyReceiver{f, node}
}

// Transport implements daemon.PeerHook: sends to blocked peers fail.
func (f *Faults) Transport(tr transport.Transport, node transport.Receiver) transport.Transport {
	return faultyTransport{tr, f, node}
}

type faultyReceiver struct {
	f *Faults
	transport.Receiver
}

func (r faultyReceiver) Receive(in transport.Inbound) error {
	if r.f.Blocked(in.Msg.From) {
		return transport.ErrNotServing
	}
	return r.Receiver.Receive(in)
}

type faultyTransport struct {
	transport.Transport
	f    *Faults
	node transport.Receiver
}

func (t faultyTransport) Send(m election.Message) {
	if t.f.Blocked(m.To) {
		// Like a transport, never call back from inside Send.
		go t.node.Failed(m, ErrBlocked)
		return
	}
	t.Transport.Send(m)
}

// Network holds one Faults per node of a cluster, created on demand, to cut
// the cluster in parts. Set devcluster.Options.Peers to its Hook. The zero
// value is ready to use and safe for concurrent use.
type Network struct {
	mu    sync.Mutex
	nodes map[election.NodeID]*Faults
}

// Of is node id's Faults.
func (n *Network) Of(id election.NodeID) *Faults {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nodes == nil {
		n.nodes = map[election.NodeID]*Faults{}
	}
	f := n.nodes[id]
	if f == nil {
		f = &Faults{}
		n.nodes[id] = f
	}
	return f
}

// Hook is Of as a devcluster.Options.Peers.
func (n *Network) Hook(id election.NodeID) daemon.PeerHook { return n.Of(id) }

// Partition cuts peer traffic between every node of a and every node of b,
// on both sides.
func (n *Network) Partition(a, b []election.NodeID) {
	for _, id := range a {
		n.Of(id).Block(b...)
	}
	for _, id := range b {
		n.Of(id).Block(a...)
	}
}

// Heal lifts every cut.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range n.nodes {
		f.Unblock()
	}
}
