package node

import (
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
	"github.com/electord/electord/election/named"
	"github.com/electord/electord/transport"
)

// The node's named elections (docs/ELECTIONS.md). Everything here runs on
// the loop goroutine: one state machine per election in which this node has
// a local candidacy, all ticked by one clock; no goroutine, timer or
// connection per election.

// namedMachine is the state machine of one election this node stands in.
type namedMachine struct {
	sm       *lazyMachine        // the election's state machine, ticked lazily (named_lazy.go)
	reported election.Leadership // the leadership last announced to peers
	since    time.Time           // when the leadership last changed
	priority int64               // the rank it started with (Config.Priority)
	// told: Node.revivals when this node last told every live member its
	// standing here (sendCandidacy): every member alive since has it,
	// unless a copy was lost on the way, which the resend rounds repair.
	told uint64
	// ownHash is this election's part of the own digest as last counted
	// (owned: counted; ownStanding).
	ownHash uint64
	owned   bool
}

// namedState is what the loop keeps of named elections.
type namedState struct {
	queues   named.Queues
	table    named.Table
	machines map[string]*namedMachine
	subs     map[named.ID]*Candidacy // keep with addSub and dropSub
	// spreadSubs counts the candidacies in subs that ask for placement
	// spread: while there is none, the rebalancer has nothing to look at.
	spreadSubs int
	watchers   map[string]map[*ElectionWatch]struct{}
	// seen: the highest leadership term this node has shown of each
	// election it knows (namedInfo).
	seen  map[string]election.Term
	store *NamedStore
	clock *tickClock // nil while no machine runs
	// dirty: the elections this loop pass touched (afterNamed drains and
	// publishes them); quiet: those of them touched only by their machine's
	// heartbeats and ticks (touchQuiet), which show nothing new unless the
	// drain finds a leadership change.
	dirty map[string]bool
	quiet map[string]struct{}
	// quorum: named elections run in quorum mode (namedQuorum).
	quorum bool
	// publishes counts publishNamed's calls (read by tests, any goroutine).
	publishes atomic.Uint64
	// replies: the named Heartbeat calls stepped in this loop pass, waiting
	// for the pass's drain to answer them (awaitReply).
	replies map[replyKey][]chan election.Message
	// Dropped counts named messages for an election this node runs no
	// machine for (it withdrew, or never stood).
	dropped uint64
	// incarnation is this node's, as its candidacies say: new at start
	// and at each revive (renewIncarnation).
	incarnation uint64
	resend      namedResend    // anti-entropy for candidacies (named_resend.go)
	own         ownStanding    // this node's digest of its own standing (named_held.go)
	changes     namedChangeLog // the loop pass's leadership changes, logged together (named_changelog.go)
	rebalance   namedRebalance // placement spread (named_rebalance.go)
	pairs       pairBeats      // the heartbeat per pair of nodes (pairbeat.go)
	// vouched is vouches, as every plain-mode machine's Config.Vouched.
	vouched func(election.NodeID) bool
	// ticks counts the named clock's ticks (machineSet); due holds, by the
	// tick (of ticks) each is next due on, the machines' due ticks as last
	// counted: after a tick for the machines it reached, after a loop pass
	// for those it touched (noteDues).
	ticks uint64
	due   dueHeap
	// gone: the peers whose hosts refused connections, taken in already
	// (namedPeerGone), until a word from one or its join shows it alive, or
	// one of this node's machines follows it again. A dead peer's refusals
	// come one per failed send, dozens in a mass failover, and each would
	// scan every machine again for nothing. A gone peer stands again only
	// by its own Candidacy, but a machine can follow it without a word from
	// it: a ring round that passed it before it died comes back naming it
	// the winner, and the round's initiator adopts it.
	gone map[election.NodeID]struct{}
}

// renewIncarnation takes this node's next incarnation (incarnation.go).
func (n *Node) renewIncarnation() {
	inc, err := nextIncarnation(n.cfg.Store.dir, n.named.incarnation)
	if err != nil {
		n.log.Warn("named elections: cannot keep this node's incarnation in the data dir; using the clock's", "err", err)
	}
	n.named.incarnation = inc
}

func (n *Node) initNamed() error {
	store, err := OpenNamedStore(n.cfg.Store.dir)
	if err != nil {
		return err
	}
	n.named = &namedState{machines: map[string]*namedMachine{}, subs: map[named.ID]*Candidacy{}, store: store,
		dirty: map[string]bool{}, quiet: map[string]struct{}{}, seen: map[string]election.Term{}, quorum: n.namedQuorum()}
	n.named.vouched = n.named.vouches
	n.renewIncarnation()
	return nil
}

// namedC is the named clock's channel; nil (never ready) while the clock
// does not run (stopIdleNamedClock), so a node without named elections
// wakes no more than before.
func (n *Node) namedC() <-chan time.Time {
	if n.named.clock == nil {
		return nil
	}
	return n.named.clock.C()
}

// catchUpNamed applies the named ticks that elapsed, before a machine is
// called.
func (n *Node) catchUpNamed() {
	if n.named.clock != nil {
		n.named.clock.catchUp()
	}
}

// newMachine starts the state machine of an election this node now stands
// in, for the head of its local queue, its first campaign as first says
// (firstWait).
func (n *Node) newMachine(name string, head named.Candidacy, first machineStart) error {
	saved := n.named.store.Load(name)
	_, standing := n.named.queues.Head(name)
	wait := -1
	if first.together > 0 && standing {
		wait = n.firstWait(name, head, first)
	}
	ecfg := n.cfg.electionConfig(saved.Term)
	ecfg.FirstWaitTicks = max(wait, 0)
	ecfg.LeaderTerm = saved.LeaderTerm
	ecfg.Priority = head.Priority
	ecfg.BootstrapExpect = 0
	if !n.namedQuorum() {
		ecfg.Quorum, ecfg.Volatile = 0, false
		ecfg.Vouched = n.named.vouched // pairbeat.go
	}
	ecfg.Rand = electionRand(n.cfg.Self.ID, name)
	sm, err := algorithms.New(n.cfg.Algorithm, ecfg)
	if err != nil {
		return err
	}
	n.catchUpNamed()
	n.startNamedClock()
	n.named.own.stop(name, n.named.machines[name])
	n.named.machines[name] = &namedMachine{sm: n.named.lazily(sm), priority: head.Priority}
	n.named.rebalanceStale()
	if !standing {
		sm.Stand(false) // a voter (quorum mode, namedvoter.go)
	}
	// The members the node knows of join one by one: a machine that knows
	// earlier terms asks each who leads, instead of waiting to campaign.
	for _, m := range n.machinePeers(name) {
		sm.Observe(election.Event{Type: election.EventJoin, Member: m})
	}
	if wait == 0 {
		sm.Campaign() // no live node ranked above: nobody to wait for
	}
	n.named.touch(name)
	return nil
}

// dropMachine stops running name's machine, after sending what it has to
// send.
func (n *Node) dropMachine(name string) {
	n.processNamed(name)
	n.forgetMachine(name)
}

// forgetMachine stops running name's machine at once.
func (n *Node) forgetMachine(name string) {
	n.named.own.stop(name, n.named.machines[name])
	delete(n.named.machines, name)
	n.named.rebalanceStale()
	n.stopIdleNamedClock()
	n.named.touch(name)
}

// The named clock runs while the node has something to do on it: a machine
// to tick, a withdrawal still to resend, or another node's candidacy to
// vouch for in its digests (named_held.go). A node that stands in nothing
// but holds its peers' candidacies (one with no app, or whose apps all
// withdrew) keeps its periods: without its digests the members that stand
// could not tell a lost copy from a member that never sends digests, and
// would send it every candidacy again every period. A node that holds
// nothing and stands in nothing runs no clock, and wakes no more than a node
// without named elections.

// startNamedClock starts the named clock if it is not running.
func (n *Node) startNamedClock() {
	if n.named.clock != nil {
		return
	}
	c := newTickClock(n.cfg.Tick)
	if n.namedQuorum() {
		c.catchAll = n.leadsNamed // see leadsNamed
	}
	c.drive(n.namedTicker())
	c.start()
	n.named.clock = c
	n.named.pairs.peers, n.named.pairs.beatWall = nil, time.Now() // pairbeat.go: kept while the clock runs
}

// stopIdleNamedClock stops the named clock once nothing is left for it:
// no machine, and no withdrawal to resend nor candidacy held, or the node
// is halted with no machine (it says nothing meanwhile; resumeNamedClock
// starts it again).
func (n *Node) stopIdleNamedClock() {
	if n.named.clock == nil || len(n.named.machines) > 0 || !n.halted() && n.namedClockWanted() {
		return
	}
	n.named.clock.stop()
	n.named.clock = nil
}

// namedClockWanted: the node has something for the named clock to do (see
// above).
func (n *Node) namedClockWanted() bool {
	return len(n.named.machines) > 0 || n.named.resend.pending() || !n.named.table.Empty()
}

// resumeNamedClock runs when a halted node takes part again (its term
// store takes writes again; a revive stands anew through newMachine). A
// clock that ran on fired while the loop applied nothing: its timer is
// spent, and is set again from the ticks it owes. One that stopped with no
// machine starts again if the node holds something to vouch for or resend.
func (n *Node) resumeNamedClock() {
	if n.halted() {
		return
	}
	if c := n.named.clock; c != nil {
		c.rearm()
	} else if n.namedClockWanted() {
		n.startNamedClock()
	}
}

// electionRand is a deterministic generator per node and election, so the
// jitter of one node's elections is not the same sequence in each.
func electionRand(id election.NodeID, name string) func(int) int {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := (uint64(id)*0x9E3779B97F4A7C15 ^ h.Sum64()) | 1
	return func(n int) int {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return int(s % uint64(n))
	}
}

// stepNamed handles a peer message of a named election, or a Candidacy.
func (n *Node) stepNamed(in transport.Inbound) {
	m := in.Msg
	n.heardFrom(m.From, time.Now())
	if m.Type == election.MsgCandidacy {
		n.candidacyFrom(m)
		return
	}
	nm := n.named.machines[m.Election]
	if nm == nil || n.halted() {
		n.named.dropped++
		if in.Reply != nil {
			close(in.Reply)
		}
		if nm == nil && !n.halted() {
			// The sender counts this node as a candidate, which it is not
			// (any more): it holds a candidacy of this node's earlier
			// process, or missed its withdrawal. Tell it again; its next
			// message of the election then goes to a node that stands.
			n.sendToMembers(n.notStanding(m.Election), m.From)
		}
		return
	}
	n.catchUpNamed()
	if err := nm.sm.Step(m); err != nil {
		n.counters.Rejected.Add(1)
		n.log.Debug("rejected a named election's message", "election", m.Election, "err", err)
	}
	if len(n.named.gone) > 0 {
		if st := nm.sm.Status(); st.Role == election.RoleFollower {
			delete(n.named.gone, st.Leader) // its next refusal times the machine out
		}
	}
	// Drained with the rest of the loop pass (afterNamed): many elections'
	// messages taken in one pass cost one synced write, not one each.
	if m.Type == election.MsgHeartbeat || m.Type == election.MsgHeartbeatResp {
		n.named.touchQuiet(m.Election, !n.named.quorum)
	} else {
		n.named.touch(m.Election)
	}
	if in.Reply != nil {
		n.awaitReply(m.Election, m.From, in.Reply)
	}
}

// stand registers a local candidacy (on the loop), one of together
// registered in the same pass.
func (n *Node) stand(c *Candidacy, together int) error {
	cand, _, err := n.named.queues.Add(c.Election, c.Value, c.standingPriority(n.cfg.Self.ID))
	if err != nil {
		return err
	}
	c.ID = cand.ID
	n.named.addSub(c)
	if n.named.machines[c.Election] == nil {
		// The first app here, or the machine stopped (a term it could not
		// persist): stand for the head of the queue. A record of the
		// election in the store means this node stood in it when its
		// process ended (the last app's withdrawal drops the record): it is
		// a restart, the other candidates may hold a leader, and their
		// answers to this node's announcement may not have come yet. So the
		// machine waits for them as a revived one does, rather than lead
		// alone.
		h, _ := n.named.queues.Head(c.Election)
		first := machineStart{} // a restart: wait as a revived machine
		if !n.named.store.Holds(c.Election) {
			first = machineStart{together: together, ranked: true}
		}
		if err := n.newMachine(c.Election, h, first); err != nil {
			n.named.queues.Remove(cand.ID)
			n.named.dropSub(cand.ID)
			return err
		}
		if len(n.named.table.Members(c.Election)) > 0 || n.named.machines[c.Election].sm.Status().Role != election.RoleLeader {
			// A machine that claimed at once with no candidate known says
			// so when its leadership is reported (namedChange), in a
			// Candidacy with its term: one copy instead of two. With
			// candidates known, its claim's Coordinators go to them in
			// the drain, before namedChange: this copy must reach them
			// first, or they refuse the Coordinator of a non-member.
			n.sendCandidacy(c.Election, 0)
		}
	} else if head, _ := n.named.queues.Head(c.Election); head.ID == cand.ID {
		// Quorum mode: this node voted in the election and now stands.
		n.followVoters(c.Election)
		n.sendCandidacy(c.Election, 0)
	}
	n.named.touch(c.Election)
	return nil
}

// addSub records local candidacy c (its ID set).
func (s *namedState) addSub(c *Candidacy) {
	s.subs[c.ID] = c
	if c.Placement == PlacementSpread {
		s.spreadSubs++
	}
}

// dropSub forgets local candidacy id.
func (s *namedState) dropSub(id named.ID) {
	if c := s.subs[id]; c != nil && c.Placement == PlacementSpread {
		s.spreadSubs--
	}
	delete(s.subs, id)
}

// withdrawCandidacy ends a local candidacy (on the loop). The head's end is
// a handover when the node leads and another node stands: its machine
// transfers the leadership to the best-ranked other candidate before it is
// dropped. An app queued next stands with a machine of its own, so it never
// inherits the token of the app before it.
func (n *Node) withdrawCandidacy(id named.ID) { n.withdrawCandidacies([]named.ID{id}) }

// withdrawCandidacies ends local candidacies, each of a different election,
// as withdrawCandidacy ends one, but in one batch: the machines that stop
// send their last messages (the handovers) in one drain, which syncs the
// terms once, and the records of the elections this node no longer stands
// in are dropped with one synced write. The order per election is
// withdrawCandidacy's, so the batch says what one by one would.
func (n *Node) withdrawCandidacies(ids []named.ID) {
	type ended struct {
		name          string
		next          named.Candidacy
		more, machine bool
	}
	var heads []ended
	var drain []string
	for _, id := range ids {
		c := n.named.subs[id]
		n.named.dropSub(id)
		gone, wasHead, next, more, err := n.named.queues.Remove(id)
		if err != nil {
			continue
		}
		name := gone.Election
		n.named.touch(name)
		if c != nil && c.events != nil {
			close(c.events)
		}
		if !wasHead {
			continue
		}
		if !more {
			n.named.resend.withdrew(name)
		}
		e := ended{name: name, next: next, more: more}
		if nm := n.named.machines[name]; nm != nil {
			if st := nm.sm.Status(); st.Role == election.RoleLeader && !n.halted() {
				if to, ok := n.bestOther(name); ok {
					n.catchUpNamed()
					if err := nm.sm.Transfer(to); err != nil {
						n.log.Warn("named election: handover on withdrawal failed", "election", name, "to", uint64(to), "err", err)
					}
				}
			}
			if n.namedQuorum() && !n.halted() {
				// The machine stays while anyone stands (a voter, or the
				// next app's): it withdraws first, so a leadership not
				// handed over above ends here and the next app can lead
				// only at a new term, never at the one the app before it
				// held. followVoters then stands it for the next app, or
				// drops it.
				n.catchUpNamed()
				nm.sm.Stand(false)
				n.named.touch(name)
				n.processNamed(name)
				n.followVoters(name)
				n.sendCandidacy(name, 0)
				continue
			}
			e.machine = true
			drain = append(drain, name)
		}
		heads = append(heads, e)
	}
	if len(drain) > 0 {
		n.drainNamed(drain)
	}
	dropped := 0
	for _, e := range heads {
		if e.machine {
			n.forgetMachine(e.name)
		}
		if e.more {
			// Known candidates (this node's handover went to one) lead.
			if err := n.newMachine(e.name, e.next, machineStart{together: 1}); err != nil {
				n.log.Error("named election: cannot stand for the next app", "election", e.name, "err", err)
			}
		} else {
			n.named.store.Drop(e.name)
			dropped++
		}
	}
	if dropped > 0 {
		yieldToSends() // the handovers drained above
		if err := n.named.store.Flush(); err != nil {
			n.log.Warn("named election: cannot drop finished elections' records", "elections", dropped, "err", err)
		}
	}
	for _, e := range heads {
		n.sendCandidacy(e.name, 0)
	}
}

// bestOther is the best-ranked other node standing in name.
func (n *Node) bestOther(name string) (election.NodeID, bool) {
	ms := n.named.table.Members(name)
	for i := len(ms) - 1; i >= 0; i-- {
		if rec := n.members[ms[i].ID]; rec != nil && rec.alive {
			return ms[i].ID, true
		}
	}
	return 0, false
}

// stopNamed drops every named machine, as a crash would: a killed node
// stands in nothing and claims nothing. The apps stay queued; restartNamed
// stands for them again. Nothing is sent (the node is halted).
func (n *Node) stopNamed() {
	for name := range n.named.machines {
		n.dropMachine(name)
	}
	n.named.table = named.Table{} // peers forget this node too; they will tell it again
	n.afterNamed()
}

// restartNamed stands again, after a revive, for the head of every local
// queue, from the persisted terms.
func (n *Node) restartNamed() {
	// A revived node is a new incarnation to its peers: what they hold of
	// its candidacies from before the kill is void, and they tell it theirs
	// (it announces the incarnation to each member gossip shows it again).
	n.renewIncarnation()
	for _, name := range n.named.queues.Elections() {
		head, _ := n.named.queues.Head(name)
		if err := n.newMachine(name, head, machineStart{}); err != nil {
			n.log.Error("named election: cannot stand again after revive", "election", name, "err", err)
		}
	}
}
