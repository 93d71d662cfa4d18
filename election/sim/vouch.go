package sim

import "github.com/electord/electord/election"

// A host's heartbeat per pair of nodes, as the node runs it for its named
// elections (Options.Vouch): each node's host hears from every member it
// can reach once a tick (a pair's heartbeat takes a heartbeat interval, a
// tick here); it vouches for a member heard steadily for a leader timeout,
// and stops when the member is silent for a leader timeout, or restarted.
// It changes an answer between the ticks it applies (answer). Stopping, it
// then tells the machine, if it follows that member, that the leader timed
// out.

// pair is what node a's host keeps of member b.
type pair struct {
	since, last uint64 // the first and last tick of the current run of hearing b
	inc         uint64 // b's incarnation in that run
	vouched     bool
}

// vouchFor gives node n's config the host's answer.
func (s *Sim) vouchFor(n *node, cfg *election.Config) {
	for k := range s.pairs {
		if k[0] == n.id {
			delete(s.pairs, k) // a restarted host knows nothing yet
		}
	}
	id := n.id
	cfg.Vouched = func(m election.NodeID) bool {
		p := s.pairs[[2]election.NodeID{id, m}]
		return p != nil && p.vouched
	}
}

// vouch runs every host's pair heartbeats for this tick.
func (s *Sim) vouch() {
	if s.pairs == nil {
		s.pairs = map[[2]election.NodeID]*pair{}
	}
	for _, a := range s.nodes {
		if !a.up {
			continue
		}
		lt := uint64(a.cfg.Defaults().LeaderTimeoutTicks)
		for _, b := range s.nodes {
			if a == b {
				continue
			}
			k := [2]election.NodeID{a.id, b.id}
			p := s.pairs[k]
			hears := b.up && a.view[b.id] && !s.cut[[2]election.NodeID{b.id, a.id}]
			switch {
			case hears && p == nil:
				s.pairs[k] = &pair{since: s.now, last: s.now, inc: b.inc}
			case hears && p.inc != b.inc:
				s.unvouch(a, b.id, false)
				s.pairs[k] = &pair{since: s.now, last: s.now, inc: b.inc}
			case hears:
				if s.now-p.last > lt {
					p.since = s.now // a new run after a silence
				}
				p.last = s.now
				if !p.vouched && s.now-p.since >= lt {
					s.answer(a, func() { p.vouched = true })
					a.sm.Observe(election.Event{Type: election.EventVouched, Member: election.Member{ID: b.id}})
				}
			case p != nil && p.vouched && s.now-p.last > lt:
				s.unvouch(a, b.id, true)
			}
		}
	}
}

// unvouch stops a's host vouching for b; silent: b fell silent (not a
// restart), so a machine that follows it times it out.
func (s *Sim) unvouch(a *node, b election.NodeID, silent bool) {
	p := s.pairs[[2]election.NodeID{a.id, b}]
	if p == nil || !p.vouched {
		return
	}
	s.answer(a, func() { p.vouched = false })
	a.sm.Observe(election.Event{Type: election.EventUnvouched, Member: election.Member{ID: b}})
	if !silent {
		return
	}
	if h, ok := a.sm.(silenceHost); ok {
		h.peerSilent(b)
	} else if st := a.sm.Status(); st.Role == election.RoleFollower && st.Leader == b {
		a.sm.Observe(election.Event{Type: election.EventLeaderTimeout})
	}
}

// silenceHost is a host of many machines (the named elections' host): it
// tells each of its machines that follows member b that b fell silent.
type silenceHost interface{ peerSilent(b election.NodeID) }

// answer changes what a's host answers (change), between the ticks a lazy
// machine applies: it is brought up to date under the old answer, and
// counts its due tick again under the new one.
func (s *Sim) answer(a *node, change func()) {
	d, ok := a.sm.(interface{ TicksUntilDue() int })
	if ok {
		d.TicksUntilDue()
	}
	change()
	if ok {
		d.TicksUntilDue()
	}
}
