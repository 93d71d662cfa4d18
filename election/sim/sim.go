// Package sim is a deterministic simulator for the election state machines:
// N nodes on a synchronous simulated network, driven by a seed and ticks,
// with fault injection and a checker that runs after every step.
//
// It has no goroutines and no clock. Each Step is one tick: messages due this
// tick are delivered in send order, every live node ticks, membership views
// are updated as gossip would, and every node's Ready is drained: the term is
// persisted first, then its messages are put on the wire.
package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// Options configure a simulation.
type Options struct {
	N         int
	Algorithm string // a name registered in election/algorithms
	Quorum    bool   // quorum mode with cluster size N
	Preempt   bool
	Seed      uint64
	// Priorities, when set, gives node i+1 priority Priorities[i].
	Priorities []int64
	// Tune may change each node's config.
	Tune func(*election.Config)
	// GossipEvery: membership views are refreshed every this many ticks (default 2).
	GossipEvery int
	// FailDelay: a send to an unreachable node is reported failed after this many ticks (default 2).
	FailDelay int
	// DeadGossipTicks: gossip still reaches a member declared dead for this
	// long (memberlist's GossipToTheDeadTime), so a link that heals sooner
	// re-merges by itself; after it only a join does (default 20).
	DeadGossipTicks int
	// RejoinEvery: how often each node's retry-join runs (default 10).
	RejoinEvery int
	// Rejoin is the retry-join policy (default RejoinMissing).
	Rejoin RejoinPolicy
	// SendsPerTick, if not 0, is how many messages a node puts on the wire
	// per tick: the rest queue at the sender, in order, so a burst of k
	// messages (a winner's k announcements, each over a new connection on
	// a loaded host) takes k/SendsPerTick ticks to go out. A heartbeat's
	// answer, a reply on its caller's call, is not counted. 0: every
	// message leaves on the tick it was sent.
	SendsPerTick int
	// Forming, if set, makes the cluster form with views that complete
	// late: at the start, node at's membership learns node of is alive only
	// at tick Forming(at, of) (0: from the start), as nodes started
	// together learn each other from gossip over a while, and one that
	// missed a join broadcast learns that member only at a state sync.
	Forming func(at, of election.NodeID) int
	// Machine, if set, builds what runs on a node from the config the
	// simulator made for it (instead of algorithms.New): the named
	// elections' host (NewNamed) is one.
	Machine func(cfg election.Config) (election.StateMachine, error)
	// Lazy ticks each node only when it is due, and applies the ticks
	// before that at once (election.Advancer) when it is due or before
	// anything else reaches it, as a host of many machines does (lazy.go).
	// A run must come out the same as without it.
	Lazy bool
	// Vouch models a host that heartbeats per pair of nodes and vouches
	// for a member to every machine (election.Config.Vouched, vouch.go).
	Vouch bool
}

// RejoinPolicy says whom a node joins again, every RejoinEvery ticks.
type RejoinPolicy uint8

const (
	// RejoinMissing: every member it ever saw that is missing from its view
	// (the daemon's policy): any split heals once the network does.
	RejoinMissing RejoinPolicy = iota
	// RejoinAlone: the seeds, only when it sees no one else alive. Under it
	// a 2|3 split held past DeadGossipTicks never heals, since neither side
	// is alone: kept to show that.
	RejoinAlone
)

type envelope struct {
	at     uint64
	msg    election.Message
	failed bool // a failure report for msg.From instead of a delivery
	// refused: the failure is a refused connection (the receiver is down
	// and its host reachable), not a timeout (election.Event.Refused).
	refused bool
	leaves  uint64 // the tick msg left its sender (Options.SendsPerTick)
}

type node struct {
	id   election.NodeID
	sm   election.StateMachine
	cfg  election.Config // as last started
	up   bool
	view map[election.NodeID]bool // whom this node's membership holds alive
	// inc is this node's incarnation (it rises at every restart); deadAt
	// and deadInc are when this node declared another dead, and at which of
	// its incarnations.
	inc     uint64
	deadAt  map[election.NodeID]uint64
	deadInc map[election.NodeID]uint64
	// sendTick and sentIn: the tick this node's next message leaves on,
	// and how many left on it already (Options.SendsPerTick).
	sendTick uint64
	sentIn   int
}

// Sim is one simulated cluster.
type Sim struct {
	opts  Options
	rng   *rand.Rand
	nodes []*node
	now   uint64
	wire  map[uint64][]envelope // by delivery tick, in send order

	// Faults.
	cut      map[[2]election.NodeID]bool   // from→to blocked
	changed  bool                          // topology changed since the last gossip round
	split    bool                          // some node holds dead a member it could reach: only a join heals that
	late     map[[2]election.NodeID]uint64 // {n, o}: n's membership learns o is alive no sooner than this tick (LateView)
	forming  map[[2]election.NodeID]uint64 // {n, o}: n's membership learns o only at this tick (Options.Forming)
	DropRate float64                       // chance a message is lost
	MaxDelay int                           // extra delay 0..MaxDelay ticks (reorders)
	Hook     func(m election.Message) bool

	pairs map[[2]election.NodeID]*pair // Options.Vouch: {a, b}: what a's host hears of b (vouch.go)

	persisted map[election.NodeID]election.Term
	// persistedLeader is each node's persisted leadership term.
	persistedLeader map[election.NodeID]election.Term
	Check           *Checker
	// Counts of messages put on the wire, by type.
	Counts map[election.MsgType]int
	// Leadership changes seen, in order.
	Changes []Change
	Trace   func(format string, a ...any)
	// after, if set, runs after the checker at every step: more checks
	// (Named's, per election).
	after func() error
}

// Change is one leadership change of one node.
type Change struct {
	Tick uint64
	Node election.NodeID
	election.Leadership
}

// New builds a cluster where every node knows every other.
func New(opts Options) (*Sim, error) {
	if err := algorithms.Check(opts.Algorithm); err != nil {
		return nil, fmt.Errorf("sim: algorithm: %w", err)
	}
	if opts.N < 1 {
		return nil, fmt.Errorf("sim: N must be at least 1")
	}
	if opts.GossipEvery == 0 {
		opts.GossipEvery = 2
	}
	if opts.FailDelay == 0 {
		opts.FailDelay = 2
	}
	if opts.DeadGossipTicks == 0 {
		opts.DeadGossipTicks = 20
	}
	if opts.RejoinEvery == 0 {
		opts.RejoinEvery = 10
	}
	s := &Sim{
		opts:            opts,
		rng:             rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		cut:             map[[2]election.NodeID]bool{},
		late:            map[[2]election.NodeID]uint64{},
		forming:         map[[2]election.NodeID]uint64{},
		persisted:       map[election.NodeID]election.Term{},
		persistedLeader: map[election.NodeID]election.Term{},
		wire:            map[uint64][]envelope{},
		Counts:          map[election.MsgType]int{},
	}
	s.Check = newChecker(s)
	for i := 1; i <= opts.N; i++ {
		s.nodes = append(s.nodes, &node{id: election.NodeID(i), deadAt: map[election.NodeID]uint64{}, deadInc: map[election.NodeID]uint64{}})
	}
	for _, n := range s.nodes {
		n.view = map[election.NodeID]bool{}
		for _, o := range s.nodes {
			if o == n {
				continue
			}
			n.view[o.id] = true
			if opts.Forming != nil {
				if at := opts.Forming(n.id, o.id); at > 0 {
					n.view[o.id], s.changed = false, true
					s.forming[[2]election.NodeID{n.id, o.id}] = uint64(at)
				}
			}
		}
		if err := s.start(n); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Sim) member(id election.NodeID) election.Member {
	m := election.Member{ID: id}
	if i := int(id) - 1; i < len(s.opts.Priorities) {
		m.Priority = s.opts.Priorities[i]
	}
	return m
}

func (s *Sim) start(n *node) error {
	cfg := election.Config{ID: n.id, Priority: s.member(n.id).Priority, Term: s.persisted[n.id], LeaderTerm: s.persistedLeader[n.id], Preempt: s.opts.Preempt}
	if s.opts.Quorum {
		cfg.Quorum = s.opts.N
	}
	for id, alive := range n.view {
		if alive {
			cfg.Peers = append(cfg.Peers, s.member(id))
		}
	}
	slices.SortFunc(cfg.Peers, func(a, b election.Member) int { return cmp.Compare(a.ID, b.ID) })
	r := rand.New(rand.NewPCG(s.rng.Uint64(), uint64(n.id)))
	cfg.Rand = func(k int) int { return r.IntN(k) }
	if s.opts.Vouch {
		s.vouchFor(n, &cfg)
	}
	if s.opts.Tune != nil {
		s.opts.Tune(&cfg)
	}
	build := func(cfg election.Config) (election.StateMachine, error) { return algorithms.New(s.opts.Algorithm, cfg) }
	if s.opts.Machine != nil {
		build = s.opts.Machine
	}
	sm, err := build(cfg)
	if err != nil {
		return err
	}
	if s.opts.Lazy {
		sm = newLazy(sm)
	}
	n.sm, n.cfg, n.up = sm, cfg, true
	return nil
}

// Node returns the state machine of node id (1-based).
func (s *Sim) Node(id election.NodeID) election.StateMachine { return s.nodes[id-1].sm }

// Config is the configuration node id (1-based) was last started with.
func (s *Sim) Config(id election.NodeID) election.Config { return s.nodes[id-1].cfg }

// N is the cluster size.
func (s *Sim) N() int { return len(s.nodes) }

// Now is the current tick.
func (s *Sim) Now() uint64 { return s.now }

// Up reports whether node id runs.
func (s *Sim) Up(id election.NodeID) bool { return s.nodes[id-1].up }

// Rand is the simulation's seeded source, for fault schedules.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// ---- running ----

// Inject feeds an event to node id, as membership or the transport would.
func (s *Sim) Inject(id election.NodeID, ev election.Event) {
	if n := s.nodes[id-1]; n.up {
		n.sm.Observe(ev)
	}
}

// Do runs f on node id's state machine (Resign, Transfer, Campaign...).
func (s *Sim) Do(id election.NodeID, f func(sm election.StateMachine) error) error {
	n := s.nodes[id-1]
	if !n.up {
		return fmt.Errorf("sim: node %d is down", id)
	}
	err := f(n.sm)
	s.drain()
	return err
}

// Step runs one tick and the checker. It returns the first violation.
func (s *Sim) Step() error {
	s.now++
	if s.opts.Vouch {
		s.vouch()
	}
	s.deliver()
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		// The instance loop sleeps through ticks that TicksUntilDue says do
		// nothing: check that every such tick indeed produces nothing.
		quiet := false
		if d, ok := n.sm.(interface{ TicksUntilDue() int }); ok && !n.sm.HasReady() && !s.opts.Lazy {
			quiet = d.TicksUntilDue() != 1
		}
		n.sm.Tick()
		if quiet && n.sm.HasReady() {
			s.Check.fail("node %d acted on a tick its TicksUntilDue said was idle", n.id)
		}
	}
	if s.changed && s.now%uint64(s.opts.GossipEvery) == 0 {
		s.changed = false
		s.gossip()
	}
	if s.split && s.now%uint64(s.opts.RejoinEvery) == 0 {
		s.rejoin()
	}
	s.drain()
	if err := s.Check.check(); err != nil || s.after == nil {
		return err
	}
	return s.after()
}

// Run steps up to ticks times and stops at the first violation.
func (s *Sim) Run(ticks int) error {
	for range ticks {
		if err := s.Step(); err != nil {
			return err
		}
	}
	return nil
}

// RunUntil steps until cond holds, for at most ticks ticks. It reports
// whether cond held.
func (s *Sim) RunUntil(ticks int, cond func() bool) (bool, error) {
	for range ticks {
		if cond() {
			return true, nil
		}
		if err := s.Step(); err != nil {
			return false, err
		}
	}
	return cond(), nil
}

func (s *Sim) deliver() {
	due := s.wire[s.now]
	delete(s.wire, s.now)
	for _, e := range due {
		if e.failed {
			if n := s.nodes[e.msg.From-1]; n.up {
				n.sm.Observe(election.Event{Type: election.EventSendFailed, Msg: e.msg, Refused: e.refused})
			}
			continue
		}
		n := s.nodes[e.msg.To-1]
		if !n.up {
			continue
		}
		if e.msg.Type == election.MsgElection && n.sm.Status().RefusesElections && e.msg.Initiator != n.id {
			// Its node's inbox refuses it (transport.ErrNotReady): the
			// sender hears of it as a failed send, one round trip later.
			s.wire[s.now+1] = append(s.wire[s.now+1], envelope{at: s.now + 1, msg: e.msg, failed: true})
			continue
		}
		var before election.Status
		if s.opts.Quorum {
			before = n.sm.Status()
		}
		err := n.sm.Step(e.msg)
		if s.opts.Quorum {
			s.Check.followedSecondHand(n, before, n.sm.Status(), e.msg)
		}
		if err != nil && !errors.Is(err, election.ErrNotMember) && !errors.Is(err, election.ErrNotLeaderMsg) {
			// A sender or leader the receiver's membership view does not
			// hold (yet, or any more), or a stale TimeoutNow, is refused by
			// design; anything else from a correct node is a bug.
			in := ""
			if e.msg.Election != "" {
				in = " of election " + e.msg.Election
			}
			s.Check.fail("node %d rejected a well-formed message%s: %v", n.id, in, err)
		}
	}
}

func (s *Sim) drain() {
	for _, n := range s.nodes {
		if !n.up || !n.sm.HasReady() {
			continue
		}
		rd := n.sm.Ready()
		if rd.Term != 0 {
			s.Check.persist(n, rd.Term)
			s.persisted[n.id] = rd.Term
		}
		if rd.LeaderTerm != 0 {
			s.persistedLeader[n.id] = rd.LeaderTerm
		}
		if rd.Change != nil {
			s.Changes = append(s.Changes, Change{Tick: s.now, Node: n.id, Leadership: *rd.Change})
			if s.Trace != nil {
				s.Trace("t=%d node %d: %v leader=%d term=%v", s.now, n.id, rd.Change.Role, rd.Change.Leader, rd.Change.Term)
			}
		}
		if s.opts.Quorum {
			// Q2: a confirmed announcement from a node that leads, at the end
			// of this step, at that term or above (it reasserted) claims that
			// term, even if the leadership moved on within the step.
			if st := n.sm.Status(); st.Role == election.RoleLeader {
				for _, m := range rd.Messages {
					if m.Type == election.MsgCoordinator && m.Confirmed && m.Leader == n.id && m.Term <= st.LeaderTerm {
						s.Check.claimed[m.Term] = true
					}
				}
			}
		}
		for _, m := range rd.Messages {
			s.send(m)
		}
	}
}

func (s *Sim) send(m election.Message) {
	s.Counts[m.Type]++
	if s.Trace != nil {
		support := "" // plain mode's; empty in quorum mode, whose traces it leaves as they were
		if m.Support != 0 {
			support = fmt.Sprintf(" support=%d", m.Support)
		}
		if m.Election != "" { // a named election's (the default election's traces stay as they were)
			support += fmt.Sprintf(" e=%s from=%d:%d", m.Election, m.FromRank.ID, m.FromRank.Priority)
		}
		s.Trace("t=%d %v %d->%d term=%v leader=%d cands=%d stamp=%d rel=%v conf=%v%s", s.now, m.Type, m.From, m.To, m.Term, m.Leader, len(m.Candidates), m.Stamp, m.Release, m.Confirmed, support)
	}
	if s.Hook != nil && !s.Hook(m) {
		return
	}
	if m.To == 0 || int(m.To) > len(s.nodes) {
		s.Check.fail("node %d sent %v to unknown node %d", m.From, m.Type, m.To)
		return
	}
	leaves := s.now
	if m.Type != election.MsgHeartbeatResp { // a reply on the caller's own call
		leaves = s.leaves(m.From)
	}
	e := envelope{at: leaves + 1, msg: m, leaves: leaves}
	to := s.nodes[m.To-1]
	switch {
	case !to.up || !s.linked(m.From, m.To):
		// The transport notices: connection refused (the receiver is down)
		// or deadline exceeded (the link is cut).
		e.failed, e.refused, e.at = true, !to.up && s.linked(m.From, m.To), leaves+uint64(s.opts.FailDelay)
	case s.DropRate > 0 && s.rng.Float64() < s.DropRate:
		if s.rng.IntN(2) == 0 {
			if s.Trace != nil {
				s.Trace("t=%d lost %v %d->%d", s.now, m.Type, m.From, m.To)
			}
			return // lost without a trace
		}
		e.failed, e.at = true, leaves+uint64(s.opts.FailDelay)
	case s.MaxDelay > 0:
		e.at += uint64(s.rng.IntN(s.MaxDelay + 1))
	}
	s.wire[e.at] = append(s.wire[e.at], e)
}

// leaves is the tick a message that node from sends now goes on the wire:
// now, or later behind its earlier messages (Options.SendsPerTick).
func (s *Sim) leaves(from election.NodeID) uint64 {
	k := s.opts.SendsPerTick
	if k <= 0 || from == 0 || int(from) > len(s.nodes) {
		return s.now
	}
	n := s.nodes[from-1]
	if n.sendTick < s.now {
		n.sendTick, n.sentIn = s.now, 0
	}
	if n.sentIn == k {
		n.sendTick, n.sentIn = n.sendTick+1, 0
	}
	n.sentIn++
	return n.sendTick
}

// InFlight is the number of messages on the wire.
func (s *Sim) InFlight() int { return s.inFlight() }

// Total is the number of messages sent of the given types (all when none).
func (s *Sim) Total(types ...election.MsgType) int {
	t := 0
	for typ, c := range s.Counts {
		if len(types) == 0 || slices.Contains(types, typ) {
			t += c
		}
	}
	return t
}

// ResetCounts zeroes the message counts.
func (s *Sim) ResetCounts() { s.Counts = map[election.MsgType]int{} }

// Agreed reports the leader and term when every live node agrees on one
// leader that leads, and false otherwise.
func (s *Sim) Agreed() (election.NodeID, election.Term, bool) {
	var leader election.NodeID
	var term election.Term
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		st := n.sm.Status()
		if st.Leader == 0 || (leader != 0 && (st.Leader != leader || st.LeaderTerm != term)) {
			return 0, 0, false
		}
		leader, term = st.Leader, st.LeaderTerm
	}
	if leader == 0 || !s.nodes[leader-1].up || s.nodes[leader-1].sm.Status().Role != election.RoleLeader {
		return 0, 0, false
	}
	return leader, term, true
}

// Leaders lists the live nodes that consider themselves leader.
func (s *Sim) Leaders() []election.NodeID {
	var ids []election.NodeID
	for _, n := range s.nodes {
		if n.up && n.sm.Status().Role == election.RoleLeader {
			ids = append(ids, n.id)
		}
	}
	return ids
}

// Describe is a one-line state of every node, for failure messages.
func (s *Sim) Describe() string {
	var b strings.Builder
	for _, n := range s.nodes {
		if !n.up {
			fmt.Fprintf(&b, "[%d down] ", n.id)
			continue
		}
		st := n.sm.Status()
		fmt.Fprintf(&b, "[%d %v leader=%d lt=%v t=%v m=%d] ", n.id, st.Role, st.Leader, st.LeaderTerm, st.Term, st.Members)
	}
	return b.String()
}
