package sim

import "github.com/electord/electord/election"

// gossip is one round of membership: each node declares dead the members it
// cannot reach both ways, and learns a member it can reach is alive only as
// memberlist would: the member restarted (a new incarnation, which it
// announces by joining), or it was declared dead less than DeadGossipTicks
// ago (gossip still reaches it, and it refutes). Otherwise the two stay
// apart until a join (rejoin).
func (s *Sim) gossip() {
	s.split = false
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		for _, o := range s.nodes {
			if o == n {
				continue
			}
			vis := s.visible(n, o)
			switch {
			case vis == n.view[o.id]:
			case !vis:
				s.setView(n, o, false)
			case s.forming[[2]election.NodeID{n.id, o.id}] != 0:
				if k := [2]election.NodeID{n.id, o.id}; s.now >= s.forming[k] {
					delete(s.forming, k)
					s.setView(n, o, true)
				} else {
					s.changed = true // a later gossip round tries again
				}
			case o.inc > n.deadInc[o.id] || s.now-n.deadAt[o.id] <= uint64(s.opts.DeadGossipTicks):
				s.setView(n, o, true)
			default:
				s.split = true
			}
		}
	}
}

func (s *Sim) setView(n, o *node, alive bool) {
	if n.view[o.id] == alive {
		return
	}
	if k := [2]election.NodeID{n.id, o.id}; alive && s.late[k] != 0 {
		if s.now < s.late[k] {
			s.changed = true // a later gossip round tries again
			return
		}
		delete(s.late, k)
	}
	n.view[o.id] = alive
	ev := election.Event{Type: election.EventJoin, Member: s.member(o.id)}
	if !alive {
		ev.Type = election.EventDead
		n.deadAt[o.id], n.deadInc[o.id] = s.now, o.inc
	}
	n.sm.Observe(ev)
}

// rejoin runs every node's retry-join: it joins the members its policy
// names. A join between two nodes that can reach each other makes them
// alive to each other, and each refutes the other side's verdict of death,
// so every node that can reach them learns they are alive.
func (s *Sim) rejoin() {
	s.split = false
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		var missing []*node
		alone := true
		for _, o := range s.nodes {
			if o == n {
				continue
			}
			if n.view[o.id] {
				alone = false
			} else {
				missing = append(missing, o)
			}
		}
		if s.opts.Rejoin == RejoinAlone && !alone {
			continue
		}
		for _, o := range missing {
			if !s.visible(n, o) {
				continue
			}
			for _, x := range s.nodes {
				if x.up && x != n && s.visible(x, n) {
					s.setView(x, n, true)
				}
				if x.up && x != o && s.visible(x, o) {
					s.setView(x, o, true)
				}
			}
		}
	}
	s.changed = true // a last gossip round finds what is still apart
}
