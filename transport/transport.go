// Package transport carries peer messages between nodes: a Transport
// interface, a grpc-go implementation, and an in-memory twin for tests.
package transport

import (
	"errors"
	"strings"

	"github.com/electord/electord/election"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Inbound is one message received from a peer.
type Inbound struct {
	Msg election.Message
	// Reply is set for a Heartbeat: the node answers on it (buffered, 1).
	Reply chan election.Message
}

// Receiver is the node's side of the transport. Its methods are called from
// many goroutines at once and must not block for long.
type Receiver interface {
	// Receive hands a message that passed wire validation to the node. It
	// returns ErrNotServing when the node does not accept peer traffic (it
	// was killed or is stopping) and ErrOverloaded when its inbox is full.
	Receive(in Inbound) error
	// Failed reports a message Send could not deliver.
	Failed(m election.Message, err error)
}

// PeerOverloaded reports whether a send failed because the peer's process
// refused it as overloaded: its inbox was full (ErrOverloaded, which the
// server returns as ResourceExhausted with ErrOverloaded's text). That peer
// is alive. Other ResourceExhausted errors (grpc-go's own, for a message
// above the send limit) are not this.
func PeerOverloaded(err error) bool {
	if errors.Is(err, ErrOverloaded) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), ErrOverloaded.Error())
}

// Transport sends peer messages. Its methods are safe for concurrent use.
type Transport interface {
	// Send delivers m to m.To asynchronously; it never blocks on the
	// network. A failure comes back through Receiver.Failed.
	Send(m election.Message)
	// SetPeer records or changes the peer address of id.
	SetPeer(id election.NodeID, addr string)
	// RemovePeer forgets id and closes its connection.
	RemovePeer(id election.NodeID)
	// Close stops sending and closes every connection.
	Close() error
}

// Connector is a Transport that can open a peer's connection before it has
// anything to send (GRPC does).
type Connector interface {
	// Connect opens the connection to id now, in the background. A
	// follower connects to a new leader at once: the leader's crash then
	// drops a live connection, which the transport reports as ErrPeerDown
	// within a re-dial, instead of the next heartbeat finding the port
	// refused up to a heartbeat interval later.
	Connect(id election.NodeID)
}

// Errors a Receiver returns; the server maps them to gRPC codes.
var (
	ErrNotServing = errors.New("transport: node is not serving peers")
	ErrOverloaded = errors.New("transport: node inbox is full")
	// ErrNotReady refuses an Election from a node that cannot take part in
	// one yet (election.ElectionRefuser): the sender skips it.
	ErrNotReady = errors.New("transport: node cannot take part in an election yet")
)
