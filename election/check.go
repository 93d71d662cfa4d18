package election

import "fmt"

// MaxCandidates is the most candidates a ring Election may carry.
const MaxCandidates = 1 << 16

func invalid(t MsgType, field, format string, a ...any) error {
	return fmt.Errorf("%w: %v.%s: %s", ErrInvalidMessage, t, field, fmt.Sprintf(format, a...))
}

// CheckMessage runs the checks that need no state on m as node self
// receives it: a known type, from and to non-zero, to == self (skipped when
// self is 0), a non-zero term (except MsgHeartbeatResp, which may report "no
// leadership known"), terms within MaxEpoch (ErrTermRange), a Coordinator
// naming a leader, and a candidate list of
// at most MaxCandidates non-zero ids. The error wraps ErrInvalidMessage and
// names the type and the field, e.g.
// "election: invalid message: Election.to: 7 is not this node (3)".
//
// The transport runs it on every decoded message and the state machine on
// every Step; the state machine then checks what needs its state (a sender
// claiming to be this node, rank claims against membership, term ownership,
// the algorithm's own fields).
//
// Safe for concurrent use.
func CheckMessage(m Message, self NodeID) error {
	t := m.Type
	switch {
	case !t.Valid():
		return fmt.Errorf("%w: type: unknown (%d)", ErrInvalidMessage, uint8(t))
	case m.From == 0:
		return invalid(t, "from", "zero")
	case m.To == 0:
		return invalid(t, "to", "zero")
	case self != 0 && m.To != self:
		return invalid(t, "to", "%d is not this node (%d)", m.To, self)
	case m.Term == 0 && t != MsgHeartbeatResp && t != MsgCandidacy:
		return invalid(t, "term", "zero")
	case !m.Term.InRange():
		return termRange(t, "term", m.Term)
	case !m.MaxTerm.InRange():
		return termRange(t, "max_term", m.MaxTerm)
	}
	switch t {
	case MsgElection:
		if n := len(m.Candidates); n > MaxCandidates {
			return invalid(t, "candidates", "%d entries, limit %d", n, MaxCandidates)
		}
		for i, r := range m.Candidates {
			if r.ID == 0 {
				return invalid(t, fmt.Sprintf("candidates[%d].id", i), "zero")
			}
		}
	case MsgCoordinator:
		if m.Leader == 0 {
			return invalid(t, "leader", "zero")
		}
	case MsgCandidacy:
		// A Candidacy in no election only says the sender's incarnation
		// (a node that starts says it to every member it meets): it stands
		// for nothing, leads nothing, carries no value.
		if m.Election == "" && (m.Confirmed || m.Term != 0 || m.Value != "" || m.LeaderSince != 0 || m.Incarnation == 0) {
			return invalid(t, "election", "empty, in a candidacy that is not only an incarnation")
		}
		if m.Term != 0 && !m.Term.OwnedBy(m.From) {
			return invalid(t, "term", "%v is not owned by the sender %d", m.Term, m.From)
		}
		if m.Held != 0 && m.Election != "" {
			return invalid(t, "held", "set in a candidacy of election %q (only an incarnation's carries it)", m.Election)
		}
	}
	if m.Held != 0 && t != MsgCandidacy {
		return invalid(t, "held", "set (only a candidacy carries it)")
	}
	return nil
}

func termRange(t MsgType, field string, v Term) error {
	return fmt.Errorf("%w: %v.%s: %v: %w (epoch %d, the limit is %d)", ErrInvalidMessage, t, field, v, ErrTermRange, v.Epoch(), uint64(MaxEpoch))
}
