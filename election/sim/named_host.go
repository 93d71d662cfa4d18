package sim

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
	"github.com/electord/electord/election/named"
)

// namedHost is what runs on one simulated node of a Named cluster: the node
// loop's share of named elections (node/named.go, node/named_ready.go), one
// pure state machine per election this node stands in, built as the node
// builds it, with the other nodes' candidacies learnt from Candidacy
// messages. The Sim sees it as the node's one state machine: it steps each
// peer message into the machine its Election names, and its Ready is every
// machine's Ready (their terms persisted first) followed in order by the
// Candidacy messages the node sends.
//
// It is rebuilt at every restart, as the node's loop is: the table of other
// candidacies is forgotten, the local queues (namedNode.apps) and the term
// store survive.
type namedHost struct {
	ns       *Named
	id       election.NodeID
	nn       *namedNode
	cfg      election.Config // the Sim's config for this node: timings, Preempt, Tune
	rand     *rand.Rand
	table    named.Table
	machines map[string]*namedMachine
	out      []election.Message // ready to send, in order
	// revivals counts the members that became alive to this node;
	// aliveAt, each member's count when it last did (node.memberRec).
	revivals uint64
	aliveAt  map[election.NodeID]uint64
}

// machineStart is how a new machine comes to its first campaign
// (node/named_start.go): together, the elections started in the same pass
// (0: it waits as a revived machine); ranked, the candidates known are
// ranked with the live nodes not heard from (a new app's candidacy).
type machineStart struct {
	together int
	ranked   bool
}

// namedMachine is the state machine of one election the node stands in,
// for one app: the head of its local queue when the machine started.
type namedMachine struct {
	sm       election.StateMachine
	app      named.ID
	from     election.Term       // the term it started from: it may only lead above it
	reported election.Leadership // the leadership last announced to peers
	priority int64               // the rank it started with (a voter's 0)
	told     uint64              // namedHost.revivals when it last told every live member its standing
}

// namedNode is what a node keeps across crashes: its apps' queued
// candidacies (the node stands for them again when it comes back, as after
// a revive; with Named.Redial they campaign again as new candidacies) and
// its named term store.
type namedNode struct {
	apps  named.Queues
	store namedStore
	host  *namedHost // the running host; replaced at restart
	// told: every election this node stood in, with the rounds that
	// resent its withdrawal to every other node since it last stood there
	// (Mends.ResendEvery resends its standing in each; Mends.WithdrawnRounds
	// forgets a withdrawal resent that many times to all).
	told    map[string]int
	started bool // it ran before: a start now is a restart
}

// namedStore is node.NamedStore without its reserve and files: each
// election's term and leadership term, and a floor that an election's term
// is folded into when nobody here stands in it any more, so a name used
// again starts from at least every term minted before.
type namedStore struct {
	rec   map[string]namedTerms
	floor election.Term
}

// namedTerms is one election's stored terms.
type namedTerms struct{ Term, LeaderTerm election.Term }

func (s *namedStore) load(name string) namedTerms {
	p := s.rec[name]
	p.Term = max(p.Term, s.floor)
	return p
}

func (s *namedStore) save(name string, term, leaderTerm election.Term) {
	if s.rec == nil {
		s.rec = map[string]namedTerms{}
	}
	p := s.load(name)
	p.Term, p.LeaderTerm = max(p.Term, term), max(p.LeaderTerm, leaderTerm)
	s.rec[name] = p
}

func (s *namedStore) drop(name string) {
	if p, ok := s.rec[name]; ok {
		s.floor = max(s.floor, p.Term)
		delete(s.rec, name)
	}
}

// newNamedHost starts node cfg.ID's named elections: as after a revive, it
// stands again for the head of every local queue, from the persisted terms,
// and waits to hear who else stands before it campaigns.
func (ns *Named) newNamedHost(cfg election.Config) (election.StateMachine, error) {
	nn := ns.nodes[cfg.ID-1]
	h := &namedHost{ns: ns, id: cfg.ID, nn: nn, cfg: cfg, machines: map[string]*namedMachine{}, aliveAt: map[election.NodeID]uint64{},
		rand: rand.New(rand.NewPCG(uint64(cfg.Rand(1<<62)), uint64(cfg.ID)))}
	nn.host = h
	for _, m := range cfg.Peers { // alive at the start: each became alive to this process
		h.revivals++
		h.aliveAt[m.ID] = h.revivals
	}
	restart := nn.started
	nn.started = true
	if restart && ns.Redial {
		// A process restart: the apps' streams ended with it, and each app
		// campaigns again, in the order they had queued in, as a new
		// candidacy (stand: at once if it knows no other candidate, and
		// telling every member).
		var again []named.Candidacy
		for _, name := range nn.apps.Elections() {
			again = append(again, slices.Clone(nn.apps.Queue(name))...)
		}
		for _, c := range again {
			nn.apps.Remove(c.ID)
		}
		for _, c := range again {
			if _, err := h.stand(c.Election, c.Value, c.Priority); err != nil {
				return nil, err
			}
		}
		return h, nil
	}
	for _, name := range nn.apps.Elections() {
		head, _ := nn.apps.Head(name)
		if err := h.newMachine(name, head, true, machineStart{}); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// newMachine starts the machine of an election this node now stands in, for
// the head of its queue, or (quorum mode, standing false) votes in
// (node.newMachine): the cluster's algorithm, timings and Preempt, the
// candidacy's priority (a voter's 0), the stored terms; the members known
// join one by one (machinePeers); its first campaign as first says
// (firstWait; without Mends.RankedStart, at once if first.together is set
// and no candidate is known).
func (h *namedHost) newMachine(name string, head named.Candidacy, standing bool, first machineStart) error {
	saved := h.nn.store.load(name)
	cfg := h.cfg
	wait := -1
	switch {
	case first.together == 0 || !standing:
	case h.ns.Mends.RankedStart:
		wait = h.firstWait(name, head, first)
	case len(h.table.Members(name)) == 0:
		wait = 0
	}
	cfg.FirstWaitTicks = max(wait, 0)
	cfg.Peers, cfg.Priority, cfg.Term, cfg.LeaderTerm = nil, head.Priority, saved.Term, saved.LeaderTerm
	cfg.BootstrapExpect = 0
	if !h.quorum() {
		cfg.Quorum, cfg.Volatile = 0, false
	}
	r := rand.New(rand.NewPCG(h.rand.Uint64(), uint64(h.id)))
	cfg.Rand = func(k int) int { return r.IntN(k) }
	sm, err := algorithms.New(h.ns.opts.Algorithm, cfg)
	if err != nil {
		return err
	}
	nm := &namedMachine{sm: sm, from: saved.Term, priority: head.Priority}
	h.machines[name] = nm
	if standing {
		h.ns.tracef("t=%d node %d: %s: stands for app %d from term %v, leadership %v", h.ns.Now(), h.id, name, head.ID, saved.Term, saved.LeaderTerm)
		nm.app = head.ID
		h.standing(name)
	} else {
		h.ns.tracef("t=%d node %d: %s: votes from term %v, leadership %v", h.ns.Now(), h.id, name, saved.Term, saved.LeaderTerm)
		sm.Stand(false) // a voter (quorum mode)
		h.ns.checker(name)
	}
	for _, m := range h.machinePeers(name) {
		sm.Observe(election.Event{Type: election.EventJoin, Member: m})
	}
	if wait == 0 {
		sm.Campaign()
	}
	return nil
}

// firstWait is how long name's new machine waits before its first campaign
// (node.firstWait, Mends.RankedStart): 0, now; -1, the machine's own wait.
func (h *namedHost) firstWait(name string, head named.Candidacy, first machineStart) int {
	if _, _, leads := h.table.Leader(name); leads {
		return -1
	}
	known := h.table.Members(name)
	if len(known) > 0 && (!first.ranked || h.quorum()) {
		return -1
	}
	if h.quorum() {
		return 0
	}
	self := election.Rank{Priority: head.Priority, ID: h.id}
	above := 0
	for _, m := range known {
		if m.Rank().Compare(self) > 0 {
			above++
		}
	}
	for _, o := range h.ns.Sim.nodes {
		if o.id == h.id || !h.alive(o.id) {
			continue
		}
		if _, ok := h.table.Get(name, o.id); ok {
			continue
		}
		if (election.Rank{Priority: head.Priority, ID: o.id}).Compare(self) > 0 {
			above++
		}
	}
	if above == 0 && len(known) > 0 {
		return StartStep
	}
	return above * StartStep
}

// standing records that this node stands in name: the resend sends its
// standing there from now on (Mends.ResendEvery), and the checks count it
// a candidate.
func (h *namedHost) standing(name string) {
	if h.nn.told == nil {
		h.nn.told = map[string]int{}
	}
	h.nn.told[name] = 0
	h.ns.stood(name, h.id)
}

// quorum reports whether named elections run in quorum mode (every node
// a voter in every election with a candidate anywhere: node/namedvoter.go).
func (h *namedHost) quorum() bool { return h.ns.opts.Quorum }

// machinePeers are the members a new machine for name starts with
// (node.machinePeers): in plain mode the candidates; in quorum mode the
// candidates and every other node this node's membership holds alive, a
// voter at rank 0.
func (h *namedHost) machinePeers(name string) []election.Member {
	cands := h.table.Members(name)
	if !h.quorum() {
		return cands
	}
	in := map[election.NodeID]bool{}
	for _, m := range cands {
		in[m.ID] = true
	}
	for _, o := range h.ns.Sim.nodes {
		if o.id != h.id && !in[o.id] && h.alive(o.id) {
			cands = append(cands, election.Member{ID: o.id})
		}
	}
	return cands
}

// wanted reports whether this node must run a machine for name
// (node.namedWanted): it stands in it, or (quorum mode) a peer does.
func (h *namedHost) wanted(name string) bool {
	if _, ok := h.nn.apps.Head(name); ok {
		return true
	}
	return h.quorum() && len(h.table.Members(name)) > 0
}

// followVoters (quorum mode) makes name's machine what this node's standing
// and its table say (node.followVoters): started (a voter when no app of
// this node stands), stood or withdrawn, replaced for an app of another
// priority (a machine's own rank is fixed), or dropped, its record folded
// into the floor, when nobody stands anywhere.
func (h *namedHost) followVoters(name string) error {
	if !h.quorum() {
		return nil
	}
	nm := h.machines[name]
	head, standing := h.nn.apps.Head(name)
	switch {
	case nm == nil && h.wanted(name):
		return h.newMachine(name, head, standing, machineStart{})
	case nm != nil && !h.wanted(name):
		h.drain(name, nm)
		delete(h.machines, name)
		h.nn.store.drop(name)
		h.ns.stoodDown(name, h.id)
		h.ns.tracef("t=%d node %d: %s: nobody stands: the voter goes", h.ns.Now(), h.id, name)
	case nm != nil && standing && nm.priority != head.Priority:
		h.drain(name, nm)
		delete(h.machines, name)
		return h.newMachine(name, head, true, machineStart{})
	case nm != nil && standing && nm.app != head.ID:
		// A voter's machine stands for the app now at the head: it may lead
		// only by winning a term above every term it has seen.
		nm.app, nm.from = head.ID, nm.sm.Status().Term
		nm.sm.Stand(true)
		h.standing(name)
		h.ns.tracef("t=%d node %d: %s: the voter stands for app %d from term %v", h.ns.Now(), h.id, name, head.ID, nm.from)
	case nm != nil && !standing && nm.priority != 0 && h.ns.Mends.VoterRankZero:
		h.drain(name, nm)
		delete(h.machines, name)
		return h.newMachine(name, head, false, machineStart{})
	case nm != nil && !standing && nm.app != 0:
		nm.app = 0
		nm.sm.Stand(false)
	}
	return nil
}

// voterMemberEvent (quorum mode) gives every machine a cluster member's
// join, leave or death (node.voterMemberEvent).
func (h *namedHost) voterMemberEvent(typ election.EventType, id election.NodeID) {
	for _, name := range h.names() {
		m := election.Member{ID: id}
		if s, ok := h.table.Get(name, id); ok && typ == election.EventJoin {
			m.Priority = s.Priority
		}
		h.machines[name].sm.Observe(election.Event{Type: typ, Member: m})
	}
}

// alive: this node's membership holds o alive (the node's members[o].alive).
func (h *namedHost) alive(o election.NodeID) bool { return h.ns.Sim.nodes[h.id-1].view[o] }

// stand queues an app's candidacy (node.stand).
func (h *namedHost) stand(name, value string, priority int64) (named.ID, error) {
	c, _, err := h.nn.apps.Add(name, value, priority)
	if err != nil {
		return 0, err
	}
	if h.machines[name] == nil {
		head, _ := h.nn.apps.Head(name)
		first := machineStart{together: 1, ranked: true}
		if _, held := h.nn.store.rec[name]; held && h.ns.Mends.RankedStart {
			first = machineStart{} // a restart: wait as a revived machine
		}
		if err := h.newMachine(name, head, true, first); err != nil {
			h.nn.apps.Remove(c.ID)
			return 0, err
		}
		if !h.ns.Mends.RankedStart || len(h.table.Members(name)) > 0 || h.machines[name].sm.Status().Role != election.RoleLeader {
			// With RankedStart, a claim at once with no candidate known
			// is told by the leadership's report (drain), with its term.
			h.sendCandidacy(name, 0)
		}
	} else if head, _ := h.nn.apps.Head(name); head.ID == c.ID {
		// Quorum mode: this node voted in the election and now stands.
		if err := h.followVoters(name); err != nil {
			return 0, err
		}
		h.sendCandidacy(name, 0)
	}
	return c.ID, nil
}

// withdraw ends an app's candidacy (node.withdrawCandidacy): the head's end
// is a transfer to the best-ranked other candidate when this node leads;
// an app queued next stands with a machine of its own (a new term).
func (h *namedHost) withdraw(id named.ID) error {
	gone, wasHead, next, more, err := h.nn.apps.Remove(id)
	if err != nil || !wasHead {
		return err
	}
	name := gone.Election
	if nm := h.machines[name]; nm != nil {
		if nm.sm.Status().Role == election.RoleLeader {
			if to, ok := h.bestOther(name); ok {
				if err := nm.sm.Transfer(to); err != nil {
					h.ns.tracef("t=%d node %d: %s: handover on withdrawal to %d failed: %v", h.ns.Now(), h.id, name, to, err)
				}
			}
		}
		if h.quorum() {
			// The machine stays while anyone stands (node.withdrawCandidacies):
			// it withdraws first, so a leadership not handed over ends here
			// and the next app leads only at a new term.
			nm.app = 0
			nm.sm.Stand(false)
			h.drain(name, nm)
			err := h.followVoters(name)
			h.sendCandidacy(name, 0)
			return err
		}
		h.drain(name, nm)
		delete(h.machines, name)
	}
	if more {
		if err := h.newMachine(name, next, true, machineStart{together: 1}); err != nil {
			return err
		}
	} else {
		h.nn.store.drop(name)
		h.ns.stoodDown(name, h.id)
	}
	h.sendCandidacy(name, 0)
	return nil
}

// bestOther is the best-ranked other node standing in name that this
// node's membership holds alive.
func (h *namedHost) bestOther(name string) (election.NodeID, bool) {
	ms := h.table.Members(name)
	for i := len(ms) - 1; i >= 0; i-- {
		if h.alive(ms[i].ID) {
			return ms[i].ID, true
		}
	}
	return 0, false
}

// sendCandidacy tells peer (every live member when 0) this node's standing
// in name (node.sendCandidacy).
func (h *namedHost) sendCandidacy(name string, peer election.NodeID) {
	if nm := h.machines[name]; nm != nil && peer == 0 {
		nm.told = h.revivals
	}
	h.sendStanding(name, peer)
}

// sendStanding sends the Candidacy of sendCandidacy, and nothing more.
func (h *namedHost) sendStanding(name string, peer election.NodeID) {
	m := election.Message{Type: election.MsgCandidacy, From: h.id, Election: name}
	if head, ok := h.nn.apps.Head(name); ok {
		m.Confirmed, m.Value = true, head.Value
		m.FromRank = election.Rank{Priority: head.Priority, ID: h.id}
		if nm := h.machines[name]; nm != nil && nm.reported.Role == election.RoleLeader {
			m.Term = nm.reported.Term
		}
	}
	for _, o := range h.ns.Sim.nodes {
		if o.id != h.id && (peer == 0 || o.id == peer) && h.alive(o.id) {
			m.To = o.id
			h.out = append(h.out, m)
		}
	}
}

// candidacyFrom records a peer's standing (node.candidacyFrom).
func (h *namedHost) candidacyFrom(m election.Message) {
	nm := h.machines[m.Election]
	if m.Confirmed {
		joined, reranked := h.table.Set(m.Election, m.From, named.Stand{Priority: m.FromRank.Priority, Value: m.Value, LeaderTerm: m.Term})
		if nm == nil && h.quorum() {
			if err := h.followVoters(m.Election); err != nil {
				h.ns.tracef("t=%d node %d: %s: cannot vote: %v", h.ns.Now(), h.id, m.Election, err)
			}
		} else if nm != nil && (joined || reranked) {
			nm.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: m.From, Priority: m.FromRank.Priority}})
		}
		if _, standing := h.nn.apps.Head(m.Election); joined && nm != nil && standing && !h.toldStanding(m.Election, m.From) {
			h.sendCandidacy(m.Election, m.From)
		}
	} else if withdrew := h.table.Withdraw(m.Election, m.From); nm != nil && (withdrew || !h.quorum() && h.follows(nm, m.From)) {
		// A leader this node's table dropped (a death verdict) may still
		// be followed: its withdrawal is news to the machine all the same.
		if h.quorum() {
			// The sender stays a member (a voter now); nobody left
			// standing: the voter goes.
			if err := h.followVoters(m.Election); err != nil {
				h.ns.tracef("t=%d node %d: %s: %v", h.ns.Now(), h.id, m.Election, err)
			}
			if nm := h.machines[m.Election]; nm != nil && h.ns.Mends.VoterRankZero {
				// ... ranked now as a voter, at 0.
				nm.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: m.From}})
			}
			return
		}
		nm.sm.Observe(election.Event{Type: election.EventLeave, Member: election.Member{ID: m.From}})
	}
}

// follows: nm's machine follows leader id (node.followsWithdrawn).
func (h *namedHost) follows(nm *namedMachine, id election.NodeID) bool {
	st := nm.sm.Status()
	return st.Role == election.RoleFollower && st.Leader == id
}

// toldStanding (Mends.RankedStart): peer was a live member when this node
// last told every live member its standing in name, so a candidacy new
// here needs no answer (node.toldStanding).
func (h *namedHost) toldStanding(name string, peer election.NodeID) bool {
	nm := h.machines[name]
	return h.ns.Mends.RankedStart && nm != nil && nm.told != 0 && h.alive(peer) && h.aliveAt[peer] <= nm.told
}

// drain puts what name's machine has to say on the way out
// (node.drainNamed): its term is durable before its messages leave, its
// leadership term before its change is announced.
func (h *namedHost) drain(name string, nm *namedMachine) {
	if !nm.sm.HasReady() {
		return
	}
	rd := nm.sm.Ready()
	if rd.Term != 0 {
		h.nn.store.save(name, rd.Term, 0)
		h.ns.checker(name).Term(h.id, rd.Term)
	}
	for _, m := range rd.Messages {
		m.Election = name
		h.out = append(h.out, m)
	}
	if h.quorum() {
		// Q2, as Sim.process does: a confirmed announcement from a node
		// that leads at that term or above claims that term.
		if st := nm.sm.Status(); st.Role == election.RoleLeader {
			for _, m := range rd.Messages {
				if m.Type == election.MsgCoordinator && m.Confirmed && m.Leader == h.id && m.Term <= st.LeaderTerm {
					h.ns.checker(name).claimed[m.Term] = true
				}
			}
		}
	}
	if rd.LeaderTerm != 0 {
		h.nn.store.save(name, 0, rd.LeaderTerm)
	}
	if ch := rd.Change; ch != nil {
		h.ns.change(name, h.id, nm.app, *ch)
		was := nm.reported.Role == election.RoleLeader
		nm.reported = *ch
		if was || ch.Role == election.RoleLeader {
			h.sendCandidacy(name, 0) // observers learn who leads from the leader's word
		}
	}
}

// names are the elections this node runs a machine for, sorted, so that a
// seed replays the same run.
func (h *namedHost) names() []string {
	names := make([]string, 0, len(h.machines))
	for name := range h.machines {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// ---- election.StateMachine, as the Sim drives it ----

func (h *namedHost) Step(m election.Message) error {
	if m.Type == election.MsgCandidacy {
		h.candidacyFrom(m)
		return nil
	}
	nm := h.machines[m.Election]
	if nm == nil {
		h.ns.Dropped++ // the node drops (and counts) a message of an election it does not stand in
		if h.ns.Mends.AnswerStrays && h.alive(m.From) {
			h.out = append(h.out, election.Message{Type: election.MsgCandidacy, From: h.id, To: m.From, Election: m.Election})
		}
		return nil
	}
	if st := nm.sm.Status(); m.Type == election.MsgElection && st.RefusesElections && m.Initiator != h.id &&
		!(st.Withdrawn && algorithms.VotersForward(h.ns.opts.Algorithm)) {
		// The inbox refuses it (node.refusesNamedElections: a bully voter):
		// the sender hears of it as a failed send, one round trip later.
		s := h.ns.Sim
		s.wire[s.now+1] = append(s.wire[s.now+1], envelope{at: s.now + 1, msg: m, failed: true})
		return nil
	}
	before := nm.sm.Status()
	err := nm.sm.Step(m)
	if h.quorum() {
		h.ns.checker(m.Election).followedSecondHand(h.ns.Sim.nodes[h.id-1], before, nm.sm.Status(), m)
	}
	if errors.Is(err, election.ErrInvalidMessage) && h.staleRanks(m) {
		// The sender's priority changed (its next app stands) and its
		// Candidacy saying so has not arrived: the node refuses the
		// message and counts it, as for any message it finds invalid.
		h.ns.StaleRanks++
		h.ns.tracef("t=%d node %d: %s: refused: %v", h.ns.Now(), h.id, m.Election, err)
		return nil
	}
	return err
}

// staleRanks: m carries a rank of a node at another priority than the
// one this node's table holds for it (for this node: than its head's, as
// in a ring Election that went round while its app before stood).
func (h *namedHost) staleRanks(m election.Message) bool {
	ranks := append([]election.Rank{m.FromRank, m.InitiatorRank}, m.Candidates...)
	head, _ := h.nn.apps.Head(m.Election)
	for _, r := range ranks {
		switch s, ok := h.table.Get(m.Election, r.ID); {
		case r.ID == 0:
		case r.ID == h.id && r.Priority != head.Priority:
			return true
		case r.ID != h.id && (!ok || s.Priority != r.Priority):
			return true
		}
	}
	return false
}

func (h *namedHost) Tick() {
	for _, name := range h.names() {
		h.machines[name].sm.Tick()
	}
	if h.resendIn() == 1 {
		// A round counts against a withdrawal only if it goes to every
		// other node: one that this node holds dead hears none of it.
		full := true
		for _, o := range h.ns.Sim.nodes {
			full = full && (o.id == h.id || h.alive(o.id))
		}
		for _, name := range slices.Sorted(maps.Keys(h.nn.told)) {
			if _, standing := h.nn.apps.Head(name); !standing {
				if k := h.ns.Mends.WithdrawnRounds; k > 0 && h.nn.told[name] >= k {
					delete(h.nn.told, name)
					continue
				}
				if full {
					h.nn.told[name]++
				}
			}
			h.sendStanding(name, 0) // a resend: not a word that makes answers redundant (node.resendOne)
		}
	}
}

// resendIn is how many ticks from now the next resend of this node's
// standing in every election it ever stood in is due (Mends.ResendEvery; 0: never). Nodes resend at offsets of their
// own, as their timers would fire.
func (h *namedHost) resendIn() int {
	k := h.ns.Mends.ResendEvery
	if k <= 0 || len(h.nn.told) == 0 {
		return 0
	}
	// Sim.Step advances the clock, then asks, then ticks: the next Tick
	// runs at Now, and 1 says it is that one.
	return 1 + int((uint64(k)-(h.ns.Now()+uint64(h.id))%uint64(k))%uint64(k))
}

// TicksUntilDue is the node's machineSet rule: the fewest ticks any machine
// is due in (0: none is armed).
func (h *namedHost) TicksUntilDue() int {
	due := h.resendIn()
	for _, nm := range h.machines {
		k := 1
		if d, ok := nm.sm.(interface{ TicksUntilDue() int }); ok {
			k = d.TicksUntilDue()
		}
		if k > 0 && (due == 0 || k < due) {
			due = k
		}
	}
	return due
}

// peerSilent: the host's pair heartbeats with b fell silent (Options.Vouch):
// every machine that follows b times it out, as the node's loop does.
func (h *namedHost) peerSilent(b election.NodeID) {
	for _, name := range h.names() {
		nm := h.machines[name]
		if st := nm.sm.Status(); st.Role == election.RoleFollower && st.Leader == b {
			nm.sm.Observe(election.Event{Type: election.EventLeaderTimeout})
		}
	}
}

// Observe routes membership and transport events as the node's loop does
// (namedMemberEvent, namedSendFailed, namedPeerGone).
func (h *namedHost) Observe(ev election.Event) {
	switch ev.Type {
	case election.EventJoin:
		h.revivals++
		h.aliveAt[ev.Member.ID] = h.revivals
		for _, name := range h.nn.apps.Elections() {
			h.sendCandidacy(name, ev.Member.ID)
		}
		if h.quorum() {
			h.voterMemberEvent(election.EventJoin, ev.Member.ID)
		}
	case election.EventDead, election.EventLeave:
		if h.quorum() {
			// Every machine has every member; those with nobody left
			// standing go.
			h.voterMemberEvent(ev.Type, ev.Member.ID)
			for _, name := range h.table.Forget(ev.Member.ID) {
				if err := h.followVoters(name); err != nil {
					h.ns.tracef("t=%d node %d: %s: %v", h.ns.Now(), h.id, name, err)
				}
			}
			return
		}
		for _, name := range h.table.Forget(ev.Member.ID) {
			if nm := h.machines[name]; nm != nil {
				nm.sm.Observe(election.Event{Type: ev.Type, Member: election.Member{ID: ev.Member.ID}})
			}
		}
	case election.EventUnvouched, election.EventVouched:
		for _, name := range h.names() {
			h.machines[name].sm.Observe(ev)
		}
	case election.EventSendFailed, election.EventPeerBusy:
		if nm := h.machines[ev.Msg.Election]; nm != nil && ev.Msg.Type != election.MsgCandidacy {
			nm.sm.Observe(ev)
		}
		if ev.Refused {
			// The transport's peer-down signal: every election that
			// follows that node campaigns now.
			for _, name := range h.names() {
				if nm := h.machines[name]; nm.sm.Status().Role == election.RoleFollower && nm.sm.Status().Leader == ev.Msg.To {
					nm.sm.Observe(election.Event{Type: election.EventLeaderTimeout})
				}
			}
		}
	}
}

func (h *namedHost) HasReady() bool {
	if len(h.out) > 0 {
		return true
	}
	for _, nm := range h.machines {
		if nm.sm.HasReady() {
			return true
		}
	}
	return false
}

func (h *namedHost) Ready() election.Ready {
	for _, name := range h.names() {
		h.drain(name, h.machines[name])
	}
	rd := election.Ready{Messages: h.out}
	h.out = nil
	return rd
}

// Status: the host runs no default election; the Sim's own checker sees a
// node that knows no leader.
func (h *namedHost) Status() election.Status {
	return election.Status{ID: h.id, Algorithm: h.ns.opts.Algorithm, Role: election.RoleNoLeader}
}

var errNoDefault = errors.New("sim: a named elections' host runs no default election")

func (h *namedHost) Campaign()                      {}
func (h *namedHost) Resign() error                  { return errNoDefault }
func (h *namedHost) Transfer(election.NodeID) error { return errNoDefault }

// Stand is the default election's candidate probe, which this host does not
// run: it does nothing.
func (h *namedHost) Stand(bool) {}
