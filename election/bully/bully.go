// Package bully is the Garcia-Molina bully election as a pure state machine
// on top of election.Core.
//
// On suspecting the leader a node sends Election to every live member that
// outranks it. If any answers within the answer timeout it waits for a
// Coordinator, and starts again if none comes within the election timeout.
// If none answers (or every send failed) it wins and announces itself. A node
// that gets an Election from a lower node answers, then runs its own.
package bully

import (
	"github.com/electord/electord/election"
)

// New returns a bully node.
func New(cfg election.Config) (*election.Core, error) {
	return election.NewCore(cfg, &Bully{})
}

type phase uint8

const (
	idle        phase = iota
	awaitAnswer       // Elections sent; waiting for an Answer
	awaitLeader       // answered; waiting for the Coordinator
)

// Bully is the bully election procedure (election.Algorithm).
type Bully struct {
	phase       phase
	term        election.Term // the current attempt
	elapsed     int
	outstanding int // Elections sent and neither answered nor failed
}

// Name implements election.Algorithm.
func (b *Bully) Name() string { return "bully" }

// Reset implements election.Algorithm.
func (b *Bully) Reset() { b.phase = idle }

// Campaign implements election.Algorithm.
func (b *Bully) Campaign(c *election.Core) {
	if c.Excluded() {
		// Resigning: let the highest other member run the election.
		ring := c.Ring()
		for i := len(ring) - 1; i >= 0; i-- {
			if ring[i].ID != c.ID() {
				c.Send(election.Message{Type: election.MsgTimeoutNow, To: ring[i].ID, Term: c.LeaderTerm(), Elect: true})
				return
			}
		}
		return
	}
	t := c.NewAttempt()
	b.term, b.elapsed, b.outstanding = t, 0, 0
	ring := c.Ring()
	for i := len(ring) - 1; i >= 0 && c.Self().Less(ring[i]); i-- {
		if ring[i].ID == c.Resigned() {
			continue // it resigned and will not answer
		}
		c.Send(election.Message{Type: election.MsgElection, To: ring[i].ID, Term: t, Initiator: c.ID(), FromRank: c.Self()})
		b.outstanding++
	}
	if b.outstanding == 0 {
		b.win(c)
		return
	}
	b.phase = awaitAnswer
}

func (b *Bully) win(c *election.Core) {
	b.phase = idle
	c.Win(b.term)
}

// Step implements election.Algorithm.
func (b *Bully) Step(c *election.Core, m election.Message) {
	switch m.Type {
	case election.MsgElection:
		b.stepElection(c, m)
	case election.MsgAnswer:
		if b.phase == awaitAnswer && m.Term == b.term {
			b.phase, b.elapsed = awaitLeader, 0
		}
	}
}

func (b *Bully) stepElection(c *election.Core, m election.Message) {
	from, known := c.RankOf(m.From)
	if !known {
		from = m.FromRank
	}
	if !from.Less(c.Self()) || c.Excluded() {
		return // only a lower node is answered; a resigning node stays silent
	}
	answer := election.Message{Type: election.MsgAnswer, To: m.From, Term: m.Term}
	switch {
	case c.Role() == election.RoleLeader:
		c.Send(answer)
		if m.Term > c.LeaderTerm() {
			c.Reassert()
		}
	case c.LeaderFresh() || (c.Role() == election.RoleFollower && m.Term.Epoch() <= c.LeaderTerm().Epoch()):
		// Our leader answered us just now, or the election is from the round
		// that made it: answer, and tell the sender who leads instead of
		// starting over. If the sender cannot reach that leader it times
		// out and tries again; by then we will have noticed too.
		c.Send(answer)
		c.Send(election.Message{Type: election.MsgCoordinator, To: m.From, Term: c.LeaderTerm(), Leader: c.Leader(), Confirmed: true})
	default:
		c.Send(answer)
		// A first start still waiting for the cluster to form answers (it
		// is alive and higher) but leaves the campaign to nodes that see
		// enough members: its own view may miss higher nodes.
		if b.phase == idle && !c.Proposing() && !c.Bootstrapping() {
			b.Campaign(c)
		}
	}
}

// Coordinated implements election.Algorithm.
func (b *Bully) Coordinated(*election.Core, election.Message, bool) {}

// Tick implements election.Algorithm.
func (b *Bully) Tick(c *election.Core) {
	if b.phase == idle {
		return
	}
	b.elapsed++
	cfg := c.Config()
	switch {
	case b.phase == awaitAnswer && b.elapsed > cfg.AnswerTimeoutTicks:
		b.win(c)
	case b.phase == awaitLeader && b.elapsed > cfg.ElectionTimeoutTicks:
		b.phase = idle
		b.Campaign(c)
	}
}

// SendFailed implements election.Algorithm: when every Election of this
// attempt failed, no one higher is alive, so win without waiting.
func (b *Bully) SendFailed(c *election.Core, m election.Message) {
	if m.Type != election.MsgElection || b.phase != awaitAnswer || m.Term != b.term {
		return
	}
	b.outstanding--
	if b.outstanding == 0 {
		b.win(c)
	}
}
