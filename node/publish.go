package node

import (
	"cmp"
	"slices"
	"time"

	"github.com/electord/electord/election"
)

// statusKey is what publish reads from the state machine's Status.
type statusKey struct {
	role       election.Role
	leader     election.NodeID
	leaderTerm election.Term
	term       election.Term
}

func keyOf(st election.Status) statusKey {
	return statusKey{st.Role, st.Leader, st.LeaderTerm, st.Term}
}

// withdraw stops this node claiming leadership at once, if it still does:
// the published answer says no leader (at the last published term, which
// is durable) and, in quorum mode, the lease is gone. process calls it
// before a batch's messages go out when the machine no longer leads: a
// TimeoutNow (handover), or an acknowledgement of a rival, can make
// another node leader within milliseconds, and the full publish comes only
// after the batch's sends and writes: a loop descheduled in between would
// otherwise let two nodes claim leadership (/leader/self 200) at once.
// Kill and a stop without a handover withdraw too, before leaving gossip
// (which can take seconds while the peers already campaign). Called by the
// loop only.
func (n *Node) withdraw() {
	n.leaseUntil.Store(0)
	n.mu.Lock()
	claimed := n.leader.Self
	li := LeaderInfo{State: StateNoLeader, Term: n.leader.Term}
	if claimed {
		n.leader, n.status.Leader = li, li
	}
	n.mu.Unlock()
	if claimed {
		n.dirty = true // the full publish after the batch
		n.announce()
	}
}

// publish recomputes the published snapshot; called by the loop only.
// Watchers hear of a change when the loop announces it, after the lease is
// updated for the same state (see announce.go).
func (n *Node) publish() {
	n.dirty = false
	st := n.sm.Status()
	n.published = keyOf(st)
	li := LeaderInfo{ID: st.Leader, Term: st.LeaderTerm, Since: n.since, State: roleState(st.Role)}
	if n.killed || (n.leaving && li.ID == n.cfg.Self.ID) {
		li = LeaderInfo{State: StateNoLeader, Term: st.LeaderTerm}
	}
	if n.storeErr != nil {
		// The frozen machine may hold a leadership never persisted: show
		// the last one the disk holds, which every earlier answer showed.
		li = LeaderInfo{State: StateNoLeader, Term: n.cfg.Store.Durable().LeaderTerm}
	}
	if li.ID == 0 {
		// With no leader, the answer carries the term of the last
		// leadership this node knew (persisted across restarts). It is a
		// leadership term, never an election attempt's: a node follows no
		// leadership older than it, so the term it reports never goes down.
		li.Since = time.Time{}
	}
	if li.ID == n.cfg.Self.ID {
		li.Self, li.Name, li.Address = true, n.cfg.Self.Name, n.cfg.Self.APIAddr
	} else if rec := n.members[li.ID]; rec != nil {
		li.Name, li.Address = rec.Name, rec.APIAddr
	}
	members := []MemberInfo{n.memberInfo(n.cfg.Self, !n.killed, li)}
	for _, rec := range n.members {
		members = append(members, n.memberInfo(rec.Meta, rec.alive, li))
	}
	slices.SortFunc(members, func(a, b MemberInfo) int { return cmp.Compare(a.ID, b.ID) })
	n.mu.Lock()
	if !sameView(n.leader, li) {
		n.announceDue = true
	}
	n.leader = li
	n.status = StatusInfo{Self: n.cfg.Self.ID, Algorithm: n.cfg.Algorithm, Leader: li, Members: members, Killed: n.killed, Term: st.Term,
		Standing: n.standing()}
	if n.candidateProbe != nil {
		p := *n.candidateProbe
		n.status.CandidateProbe = &p
	}
	if n.storeErr != nil {
		n.status.Term = max(n.cfg.Store.Durable().Term, li.Term)
		n.status.Fault = "cannot persist the term: " + n.storeErr.Error()
	}
	n.mu.Unlock()
}

func (n *Node) memberInfo(m Meta, alive bool, li LeaderInfo) MemberInfo {
	mi := MemberInfo{ID: m.ID, Name: m.Name, Priority: m.Priority, PeerAddr: m.PeerAddr, APIAddr: m.APIAddr, HTTPAddr: m.HTTPAddr,
		Alive: alive, Algorithm: n.cfg.Algorithm}
	switch {
	case !alive:
	case li.ID == m.ID:
		mi.Role, mi.Term = StateLeader, li.Term
	case li.ID != 0:
		mi.Role, mi.Term = StateFollower, li.Term
	}
	if m.ID == n.cfg.Self.ID && alive {
		mi.Role = li.State
	}
	return mi
}

func roleState(r election.Role) string {
	switch r {
	case election.RoleLeader:
		return StateLeader
	case election.RoleFollower:
		return StateFollower
	case election.RoleElecting:
		return StateElecting
	}
	return StateNoLeader
}

// Leader is who leads, as this node sees it. In quorum mode this node
// claims leadership only while its lease holds by the wall clock (see
// leaseView).
func (n *Node) Leader() LeaderInfo {
	li, _ := n.leaseView()
	return li
}

// Status is this node's view of the cluster.
func (n *Node) Status() StatusInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	st := n.status
	st.Members = slices.Clone(st.Members)
	return st
}

// Members lists every member this node knows, alive or not.
func (n *Node) Members() []MemberInfo { return n.Status().Members }

// Subscribe streams leadership changes; the current state comes first.
// Every event is what Leader answered when it was published: in quorum
// mode a lease that starts or lapses is an event, the lapse published at
// the lease's end even while the loop is paused or starved.
func (n *Node) Subscribe() *Subscription { return n.subscribe() }

// DroppedEvents counts leadership events lost by slow subscribers.
func (n *Node) DroppedEvents() uint64 { return n.hub.dropped.Load() }
