package node

import (
	"errors"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// Receive implements transport.Receiver; called by many goroutines.
func (n *Node) Receive(in transport.Inbound) error {
	if !n.serving.Load() {
		return transport.ErrNotServing
	}
	select {
	case n.inbox <- in:
		return nil
	default:
		n.counters.InboxFull.Add(1)
		return transport.ErrOverloaded
	}
}

// failure is a send the transport could not deliver; busy: an Election a
// node above refused as overloaded (see Failed).
type failure struct {
	m    election.Message
	busy bool
}

// Failed implements transport.Receiver; called by many goroutines.
func (n *Node) Failed(m election.Message, err error) {
	// An Election refused by an overloaded node above (its inbox was full):
	// that node is alive and busy. For the bully that is its Answer, not its
	// death (EventPeerBusy); as a failure, a node whose Election to the
	// highest survivor met its full inbox (128 processes after a crash) won
	// while that node was announcing itself.
	busy := m.Type == election.MsgElection && transport.PeerOverloaded(err)
	if errors.Is(err, transport.ErrPeerDown) {
		select {
		case n.peerDown <- m:
		default: // one report is enough; the heartbeat timeout covers the rest
		}
	}
	select {
	case n.failures <- failure{m, busy}:
	default:
		n.counters.FailuresLost.Add(1) // timeouts recover what this loses
	}
}

func (n *Node) drainInbox() {
	for {
		select {
		case in := <-n.inbox:
			if in.Reply != nil {
				close(in.Reply)
			}
		default:
			return
		}
	}
}
