package sim

import (
	"slices"

	"github.com/electord/electord/election"
)

// Crash stops node id; its persisted term survives.
func (s *Sim) Crash(id election.NodeID) {
	n := s.nodes[id-1]
	if n.up {
		n.up, s.changed = false, true
		s.Check.crashed(n)
		s.unsend(id)
	}
}

// unsend drops the messages node id queued that have not left it yet
// (Options.SendsPerTick): a crashed process sends nothing more.
func (s *Sim) unsend(id election.NodeID) {
	for at, es := range s.wire {
		kept := es[:0]
		for _, e := range es {
			if e.failed || e.msg.From != id || e.leaves <= s.now {
				kept = append(kept, e)
			}
		}
		s.wire[at] = kept
	}
}

// Restart starts a crashed node again from its persisted term.
func (s *Sim) Restart(id election.NodeID) error {
	n := s.nodes[id-1]
	if n.up {
		return nil
	}
	n.inc++ // a new incarnation: joining, it is announced to everyone it reaches
	for _, o := range s.nodes {
		if o != n {
			n.view[o.id] = s.visible(n, o)
		}
	}
	if err := s.start(n); err != nil {
		return err
	}
	s.changed = true
	s.Check.restarted(n)
	return nil
}

// Cut blocks messages from a to b (one way).
func (s *Sim) Cut(a, b election.NodeID) {
	s.cut[[2]election.NodeID{a, b}] = true
	s.changed = true
}

// Isolate cuts node id off from everyone, both ways.
func (s *Sim) Isolate(id election.NodeID) {
	for _, o := range s.nodes {
		if o.id != id {
			s.Cut(id, o.id)
			s.Cut(o.id, id)
		}
	}
}

// Partition splits the cluster into groups that cannot talk to each other.
// A node named in no group is cut off from everyone.
func (s *Sim) Partition(groups ...[]election.NodeID) {
	s.cut, s.changed = map[[2]election.NodeID]bool{}, true
	group := map[election.NodeID]int{}
	for gi, g := range groups {
		for _, id := range g {
			group[id] = gi + 1
		}
	}
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			if a != b && (group[a.id] == 0 || group[a.id] != group[b.id]) {
				s.Cut(a.id, b.id)
			}
		}
	}
}

// Bridge splits the cluster into two halves that only bridge sees both of.
func (s *Sim) Bridge(bridge election.NodeID, left, right []election.NodeID) {
	s.Partition(append(slices.Clone(left), bridge), append(slices.Clone(right), bridge))
	for _, id := range left {
		delete(s.cut, [2]election.NodeID{bridge, id})
		delete(s.cut, [2]election.NodeID{id, bridge})
	}
	s.changed = true
}

// LateView has node at's membership learn that node of is alive again no
// sooner than ticks from now, as memberlist learns members back one at a
// time after a heal, so a follower back from isolation may send its first
// round while it still holds the leader dead.
func (s *Sim) LateView(at, of election.NodeID, ticks int) {
	s.late[[2]election.NodeID{at, of}] = s.now + uint64(ticks)
	s.changed = true
}

// Heal removes every cut, drop and delay.
func (s *Sim) Heal() {
	s.cut, s.changed = map[[2]election.NodeID]bool{}, true
	s.DropRate, s.MaxDelay = 0, 0
	if s.Trace != nil {
		s.Trace("t=%d heal", s.now)
	}
}

// Recover ends every fault: the network heals (Heal) and every crashed
// node starts again from its persisted term.
func (s *Sim) Recover() error {
	s.Heal()
	for _, n := range s.nodes {
		if err := s.Restart(n.id); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sim) linked(a, b election.NodeID) bool { return !s.cut[[2]election.NodeID{a, b}] }

// visible is what gossip would say: o runs and the link works both ways.
func (s *Sim) visible(n, o *node) bool { return o.up && s.linked(n.id, o.id) && s.linked(o.id, n.id) }
