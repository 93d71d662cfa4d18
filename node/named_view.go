package node

import (
	"slices"
	"time"

	"github.com/electord/electord/election"
)

// publishNamed recomputes what readers see of name, and tells its local
// candidacies what changed.
func (n *Node) publishNamed(name string) {
	n.named.publishes.Add(1)
	info, known := n.namedInfo(name)
	n.mu.Lock()
	n.noteNamed(n.elections[name], &info, known)
	if known {
		if n.elections == nil {
			n.elections = map[string]ElectionInfo{}
		}
		n.elections[name] = info
	} else {
		delete(n.elections, name)
	}
	n.mu.Unlock()
	for i, cand := range n.named.queues.Queue(name) {
		if c := n.named.subs[cand.ID]; c != nil {
			c.offer(info.Leader, i == 0, i)
		}
	}
	for w := range n.named.watchers[name] {
		w.offer(info.Leader)
	}
}

// namedInfo is name as this node sees it: its machine's leadership if it
// stands, else the leadership its candidates announce.
func (n *Node) namedInfo(name string) (ElectionInfo, bool) {
	nm := n.named.machines[name]
	others := n.named.table.Members(name)
	info := ElectionInfo{Election: name, Candidates: len(others), Local: len(n.named.queues.Queue(name)),
		Leader: LeaderInfo{Election: name, State: StateNoLeader}}
	if nm == nil && len(others) == 0 && info.Local == 0 {
		delete(n.named.seen, name)
		return info, false
	}
	li := LeaderInfo{Election: name, State: StateNoLeader}
	switch {
	case nm != nil && !n.killed:
		if info.Local > 0 {
			info.Candidates++ // not a voter's machine
		}
		st := nm.sm.Status()
		li.ID, li.Term, li.State, li.Since = st.Leader, st.LeaderTerm, roleState(st.Role), nm.since
	case !n.killed:
		if id, s, ok := n.named.table.Leader(name); ok {
			li.ID, li.Term, li.State, li.Since = id, s.LeaderTerm, StateFollower, leaderSince(s)
		}
	}
	// What this node shows of an election never goes back to an older
	// leadership, as for the default election: a candidate's claim can be
	// stale (its word that it stepped down comes from another sender than
	// the new leader's, in either order), and a machine started afresh
	// knows no leadership of the election's past.
	if seen := n.named.seen[name]; li.Term < seen {
		li = LeaderInfo{Election: name, State: StateNoLeader, Term: seen}
		if nm != nil && !n.killed {
			li.State = roleState(nm.sm.Status().Role)
		}
	} else if li.ID != 0 {
		n.named.seen[name] = li.Term
	}
	if li.ID == 0 {
		li.Since = time.Time{}
	}
	if li.ID == n.cfg.Self.ID {
		li.Self, li.Name, li.Address = true, n.cfg.Self.Name, n.cfg.Self.APIAddr
		if head, ok := n.named.queues.Head(name); ok {
			li.Value = head.Value
		}
	} else if li.ID != 0 {
		if rec := n.members[li.ID]; rec != nil {
			li.Name, li.Address = rec.Name, rec.APIAddr
		}
		if s, ok := n.named.table.Get(name, li.ID); ok {
			li.Value = s.Value
		}
	}
	info.Leader = li
	if li.Self && n.cfg.Quorum > 0 && nm != nil && n.named.clock != nil {
		// As the default election's lease (updateLease): the machine's
		// lease end in ticks, counted from when its clock's last tick fell
		// due. A claim is shown only before it (ElectionLeader), so a loop
		// paused or starved past its lease claims nothing.
		if st := nm.sm.Status(); st.Role == election.RoleLeader && st.LeaseEnd > st.Now && !n.halted() {
			info.leaseUntil = n.named.clock.tickWall().Add(time.Duration(st.LeaseEnd-st.Now) * n.cfg.Tick).UnixNano()
		}
	}
	info.CandidateIDs = candidateIDs(others, nm != nil && !n.killed, n.cfg.Self.ID)
	return info, true
}

// NamedElections lists the named elections this node knows, sorted by name.
func (n *Node) NamedElections() []ElectionInfo {
	n.mu.RLock()
	out := make([]ElectionInfo, 0, len(n.elections))
	for _, e := range n.elections {
		out = append(out, e)
	}
	n.mu.RUnlock()
	slices.SortFunc(out, func(a, b ElectionInfo) int {
		switch {
		case a.Election < b.Election:
			return -1
		case a.Election > b.Election:
			return 1
		}
		return 0
	})
	return out
}

// ElectionLeader is name's leadership as this node sees it; ok is false
// when this node knows nothing of the election.
func (n *Node) ElectionLeader(name string) (LeaderInfo, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	e, ok := n.elections[name]
	if !ok {
		return LeaderInfo{Election: name, State: StateNoLeader}, false
	}
	if e.Leader.Self && n.cfg.Quorum > 0 && time.Now().UnixNano() >= e.leaseUntil {
		// In quorum mode a claim stands only while its lease holds by the
		// wall clock, checked on every call, as for the default election
		// (leaseView): the loop may not have stepped down yet.
		return LeaderInfo{Election: name, State: StateNoLeader, Term: e.Leader.Term}, true
	}
	return e.Leader, true
}
