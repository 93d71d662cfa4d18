package node

import (
	"fmt"

	"github.com/electord/electord/election"
)

// cause is the input the loop is handling: a peer message, a failed send, a
// membership event, a command, or (the zero value) a timer. It is kept as
// plain values and formatted only when the leadership changes, so the loop
// pays nothing for it on the common path.
type cause struct {
	kind string // "" = a timer (heartbeat timeout, lease, election timeout)
	msg  election.Message
	ev   MemberEvent
}

func (c cause) String() string {
	switch c.kind {
	case "":
		return "timer (a timeout or the lease ran out)"
	case "message":
		m := c.msg
		s := fmt.Sprintf("%v from node %d at term %v", m.Type, m.From, m.Term)
		if m.Leader != 0 {
			s += fmt.Sprintf(" naming leader %d", m.Leader)
		}
		switch {
		case m.Reject:
			s += " (reject)"
		case m.Release:
			s += " (release)"
		}
		return s
	case "send failed", "peer down", "peer busy":
		return fmt.Sprintf("%s: %v to node %d", c.kind, c.msg.Type, c.msg.To)
	case "membership":
		return fmt.Sprintf("membership: node %d %v", c.ev.Member.ID, c.ev.Type)
	}
	return c.kind
}

// logChange logs a leadership change with what caused it: the operator's
// (and the chaos harness's) answer to "why did this node lose its leader".
func (n *Node) logChange(l election.Leadership) {
	cause := n.cause.String()
	n.log.Info("leadership changed", "role", roleState(l.Role), "leader", uint64(l.Leader), "term", l.Term.String(),
		"fencing_token", uint64(l.Term), "cause", cause)
	n.recordChange(l, cause)
}
