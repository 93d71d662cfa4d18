package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// Named is a cluster running named elections (docs/ELECTIONS.md) on the
// Sim's network, faults, membership and checker: every node runs a
// namedHost, which drives one state machine per election it stands in as
// the node does, and apps stand and withdraw through Stand and Withdraw.
//
// After every step, per election, it checks:
//
//	S1, S2, S3: the Checker's rules, one Checker per election, over the
//	    nodes that run a machine for it; an observer's view (the leader a
//	    Candidacy said leads) counts as a claim for S1. S2 holds across
//	    restarts and across a node's withdrawing and standing again (the
//	    floor); S3 across restarts and within a standing (a node that
//	    stood down from an election entirely starts again knowing no
//	    leadership, as the node does).
//	W1: a node leads only while an app of its stands there, and, after it
//	    withdrew and stood again, only at a term above every term it had
//	    seen before (a new machine mints a new term).
//	W2: no term is led for two apps (a queued app that stands next never
//	    inherits the fencing token of the app before it).
//	W3: no node names as leader a node that never stood in the election.
//
// With Options.Quorum, every node is a voter in every election with a
// candidate anywhere, as node/namedvoter.go builds it (a machine over every
// live node, Stand(false) without a local app, dropped when nobody stands
// anywhere), and per election it also checks:
//
//	Q1: never two nodes claiming the election's leadership at one tick.
//	Q2: as the Checker's (a follower names only a leadership some node
//	    claimed; a node cut off from a majority names no leader past the
//	    grace unless it follows a leader it reaches that claims; a leader
//	    is taken up only on its own word), judged on the election's
//	    machines.
//
// Liveness is checked by the caller with AgreedNamed.
type Named struct {
	*Sim
	nodes  []*namedNode
	checks map[string]*Checker
	ever   map[string]map[election.NodeID]bool // who ever stood in each election
	tokens map[string]map[election.Term]appID  // W2: the app that led each term
	// Leaderships are the named machines' leadership changes, in order.
	Leaderships []NamedChange
	// Dropped counts messages of an election their receiver ran no machine
	// for (it withdrew, or never stood): the node drops them.
	Dropped int
	// StaleRanks counts messages refused for a rank this node's table
	// does not hold yet (the sender's next app stands at another
	// priority; its Candidacy is late or lost).
	StaleRanks int
	// Redial: a crash ends the apps' streams, and they campaign again
	// when their node is back (new candidacies), as after a process
	// restart; without it their candidacies outlive the crash, as after
	// the node's kill and revive.
	Redial bool
	// Mends, when set, model what the node does beyond its first build;
	// the zero value is that first build (see Mends).
	Mends Mends
}

// Mends are behaviours beyond the node's first build, modelled so that the
// simulator can show what they change; the zero value is that first build.
// Without them a Candidacy that is lost (a lossy link, a cut gossip has not
// noticed, a restart gossip never saw) is repaired only by the next change
// of that candidacy or by a gossip join, so an election can stay split
// after the network heals: see TestNamedLostCandidacy. The node now does
// what ResendEvery 20 with WithdrawnRounds 3 model (node/named_resend.go).
type Mends struct {
	// ResendEvery: every this many ticks each node sends its standing in
	// every election it ever stood in, withdrawn or not, to every live
	// member (anti-entropy; a real node would send one batched Candidacy
	// listing all its standings, the receiver dropping the ones not
	// listed).
	ResendEvery int
	// WithdrawnRounds, with ResendEvery: a withdrawal is resent until
	// this many rounds have sent it to every other node, then forgotten
	// (the node's withdrawnRounds); 0 resends it for ever.
	WithdrawnRounds int
	// VoterRankZero (quorum mode): a machine whose app withdrew and that
	// stays as a voter is replaced by a voter's machine at rank 0, and
	// the other nodes re-rank the withdrawn node at 0 on its withdrawal:
	// every node ranks a voter alike. Without it the machine keeps the
	// app's priority as its own rank, and a node whose machine was
	// started after the withdrawal (a voter's, rank 0) refuses the ring
	// rounds it forwards ("claims rank {2 2}, membership says {0 2}"), so
	// no round through it elects: TestPropertyNamedElections with
	// -named.quorum finds it (ring, 46 seeds of 300; TestNamedQuorumVoterRank).
	VoterRankZero bool
	// Vouch: each node's host vouches for the members it hears steadily
	// (Options.Vouch), as the node's pair heartbeats do for its named
	// elections in plain mode.
	Vouch bool
	// RankedStart: a new election's candidates campaign in rank order
	// (node/named_start.go): a new app's machine waits StartStep ticks per
	// live node that would outrank it if it stood, and one step when every
	// candidate it knows ranks below it; a restarted one (its store holds
	// the election) waits its own timeout. A candidate new to a node is
	// answered only if the node's last word to every member went out
	// before that candidate was a live member here, and a machine that
	// claims at once with no candidate known says so once, with its term,
	// when its leadership is reported. Without it, as the node was built
	// before: a new app's machine with no candidate known claims at once,
	// and every new candidate is answered.
	RankedStart bool
	// AnswerStrays: a node that gets a message of an election it runs no
	// machine for answers the sender with a withdrawal (node.stepNamed):
	// the sender holds a candidacy of it that is void, or missed its
	// withdrawal. Without it the message is dropped, and only the resend
	// repairs the sender's table.
	AnswerStrays bool
}

// StartStep is RankedStart's wait per node ranked above, in ticks (the
// node's startStep for one election started alone).
const StartStep = 5

// appID names one app's candidacy: the node it stands through and its id
// there.
type appID struct {
	node election.NodeID
	id   named.ID
}

// NamedChange is one leadership change of one node's machine in one
// election, for the app it stood for.
type NamedChange struct {
	Tick     uint64
	Node     election.NodeID
	Election string
	App      named.ID
	election.Leadership
}

// NewNamed builds a cluster of opts.N nodes with no candidacy yet.
func NewNamed(opts Options) (*Named, error) {
	if opts.Machine != nil {
		return nil, fmt.Errorf("sim: NewNamed builds the nodes' machines itself")
	}
	ns := &Named{checks: map[string]*Checker{}, ever: map[string]map[election.NodeID]bool{},
		tokens: map[string]map[election.Term]appID{}}
	for range opts.N {
		ns.nodes = append(ns.nodes, &namedNode{})
	}
	opts.Machine = ns.newNamedHost
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	ns.Sim = s
	s.after = ns.checkNamed
	return ns, nil
}

// Stand has an app campaign for name through node id (at the tail of that
// node's queue); it returns the candidacy's id on that node.
func (ns *Named) Stand(id election.NodeID, name, value string, priority int64) (named.ID, error) {
	if !ns.Up(id) {
		return 0, fmt.Errorf("sim: node %d is down", id)
	}
	c, err := ns.nodes[id-1].host.stand(name, value, priority)
	ns.drain()
	return c, err
}

// Withdraw ends an app's candidacy on node id, as its stream's end does.
func (ns *Named) Withdraw(id election.NodeID, app named.ID) error {
	if !ns.Up(id) {
		return fmt.Errorf("sim: node %d is down", id)
	}
	err := ns.nodes[id-1].host.withdraw(app)
	ns.drain()
	return err
}

// Queue is node id's queue of candidacies in name, head first.
func (ns *Named) Queue(id election.NodeID, name string) []named.Candidacy {
	return ns.nodes[id-1].apps.Queue(name)
}

// Elections are the names anyone ever stood in, sorted.
func (ns *Named) Elections() []string { return slices.Sorted(maps.Keys(ns.ever)) }

// Machine is node id's state machine for name, or nil when it runs none
// (it is down, or stands in no app's name there).
func (ns *Named) Machine(id election.NodeID, name string) election.StateMachine {
	if !ns.Up(id) {
		return nil
	}
	if nm := ns.nodes[id-1].host.machines[name]; nm != nil {
		return nm.sm
	}
	return nil
}

// View is the leader and term node id shows for name: its machine's, or,
// when it runs none, the leadership a candidate announced (an observer).
func (ns *Named) View(id election.NodeID, name string) (election.NodeID, election.Term) {
	if sm := ns.Machine(id, name); sm != nil {
		st := sm.Status()
		return st.Leader, st.LeaderTerm
	}
	if l, s, ok := ns.nodes[id-1].host.table.Leader(name); ok && ns.Up(id) {
		return l, s.LeaderTerm
	}
	return 0, 0
}

// AgreedNamed reports name's leader and term when every live node shows
// the same leadership and its leader leads for a live candidacy; with no
// live candidacy anywhere, ok is true when no live node shows a leader.
func (ns *Named) AgreedNamed(name string) (election.NodeID, election.Term, bool) {
	standing := false
	for i := range ns.nodes {
		id := election.NodeID(i + 1)
		standing = standing || (ns.Up(id) && len(ns.Queue(id, name)) > 0)
	}
	var leader election.NodeID
	var term election.Term
	for i := range ns.nodes {
		id := election.NodeID(i + 1)
		if !ns.Up(id) {
			continue
		}
		l, t := ns.View(id, name)
		if !standing && l != 0 || standing && (l == 0 || leader != 0 && (l != leader || t != term)) {
			return 0, 0, false
		}
		leader, term = l, t
	}
	if !standing {
		return 0, 0, true
	}
	if sm := ns.Machine(leader, name); sm == nil || sm.Status().Role != election.RoleLeader {
		return 0, 0, false
	}
	return leader, term, true
}

// AllAgreed reports whether AgreedNamed holds for every election.
func (ns *Named) AllAgreed() bool {
	for _, name := range ns.Elections() {
		if _, _, ok := ns.AgreedNamed(name); !ok {
			return false
		}
	}
	return true
}

// DescribeNamed is a one-line state of name on every node, for failure
// messages.
func (ns *Named) DescribeNamed(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", name)
	for i := range ns.nodes {
		id := election.NodeID(i + 1)
		apps := len(ns.Queue(id, name))
		if !ns.Up(id) {
			fmt.Fprintf(&b, "[%d down apps=%d] ", id, apps)
			continue
		}
		var cands []election.NodeID // the other candidates it knows of
		for _, m := range ns.nodes[i].host.table.Members(name) {
			cands = append(cands, m.ID)
		}
		if sm := ns.Machine(id, name); sm != nil {
			st := sm.Status()
			fmt.Fprintf(&b, "[%d %v leader=%d lt=%v t=%v m=%d apps=%d cands=%v] ", id, st.Role, st.Leader, st.LeaderTerm, st.Term, st.Members, apps, cands)
		} else {
			l, t := ns.View(id, name)
			fmt.Fprintf(&b, "[%d observer leader=%d lt=%v cands=%v] ", id, l, t, cands)
		}
	}
	return b.String()
}

// checker is name's Checker.
func (ns *Named) checker(name string) *Checker {
	c := ns.checks[name]
	if c == nil {
		c = newChecker(ns.Sim)
		c.statusOf = func(n *node) election.Status { return ns.status(n.id, name) }
		ns.checks[name] = c
	}
	return c
}

// stood records that node stands in name.
func (ns *Named) stood(name string, node election.NodeID) {
	if ns.ever[name] == nil {
		ns.ever[name] = map[election.NodeID]bool{}
	}
	ns.ever[name][node] = true
	ns.checker(name)
}

// stoodDown records that node stands in name no more: its next machine
// there starts knowing no leadership (S3 starts again; S2 does not).
func (ns *Named) stoodDown(name string, node election.NodeID) { delete(ns.checker(name).shown, node) }

func (ns *Named) change(name string, node election.NodeID, app named.ID, ch election.Leadership) {
	ns.Leaderships = append(ns.Leaderships, NamedChange{Tick: ns.now, Node: node, Election: name, App: app, Leadership: ch})
	ns.tracef("t=%d node %d: %s: %v leader=%d term=%v (app %d)", ns.now, node, name, ch.Role, ch.Leader, ch.Term, app)
}

func (ns *Named) tracef(format string, a ...any) {
	if ns.Trace != nil {
		ns.Trace(format, a...)
	}
}

// status is node id's machine's state in name; a node down or running no
// machine for it knows no leader of it.
func (ns *Named) status(id election.NodeID, name string) election.Status {
	if sm := ns.Machine(id, name); sm != nil {
		return sm.Status()
	}
	return election.Status{ID: id, Role: election.RoleNoLeader}
}

// checkQuorum checks Q1 and Q2 on name's machines (quorum mode).
func (ns *Named) checkQuorum(c *Checker, name string) {
	var claiming []election.NodeID
	for i := range ns.nodes {
		id := election.NodeID(i + 1)
		st := ns.status(id, name)
		switch st.Role {
		case election.RoleLeader:
			claiming = append(claiming, id)
		case election.RoleFollower:
			if !c.claimed[st.LeaderTerm] {
				c.fail("Q2 violated: node %d follows node %d in %s at term %v, which no node led", id, st.Leader, name, st.LeaderTerm)
			}
		}
	}
	if len(claiming) > 1 {
		c.fail("Q1 violated: nodes %v all claim leadership of %s at this tick in quorum mode", claiming, name)
	}
	c.checkMinority()
}

// checkNamed runs the per-election checks after a step; it returns the
// first violation, with its election.
func (ns *Named) checkNamed() error {
	for _, name := range ns.Elections() {
		c := ns.checker(name)
		for i, nn := range ns.nodes {
			id := election.NodeID(i + 1)
			if !ns.Up(id) {
				continue
			}
			nm := nn.host.machines[name]
			if nm == nil {
				if l, s, ok := nn.host.table.Leader(name); ok {
					c.Claim(id, l, s.LeaderTerm)
					ns.stoodOrFail(c, name, id, l)
				}
				continue
			}
			st := nm.sm.Status()
			if c.status(id, st) {
				ns.leads(c, name, id, nm, st.LeaderTerm)
			}
			if st.Leader != 0 {
				ns.stoodOrFail(c, name, id, st.Leader)
			}
		}
		if ns.opts.Quorum {
			ns.checkQuorum(c, name)
		}
		if err := c.Err(); err != nil {
			return fmt.Errorf("election %s: %w\n%s", name, err, ns.DescribeNamed(name))
		}
	}
	return nil
}

// leads checks W1 and W2 for node id leading name at term t.
func (ns *Named) leads(c *Checker, name string, id election.NodeID, nm *namedMachine, t election.Term) {
	if head, ok := ns.nodes[id-1].apps.Head(name); !ok || head.ID != nm.app {
		c.fail("W1 violated: node %d leads %s at term %v for app %d, which is not the head of its queue (%v)", id, name, t, nm.app, ns.Queue(id, name))
	}
	if t <= nm.from {
		c.fail("W1 violated: node %d leads %s at term %v for app %d, not above %v, the term it stood from", id, name, t, nm.app, nm.from)
	}
	if ns.tokens[name] == nil {
		ns.tokens[name] = map[election.Term]appID{}
	}
	app := appID{id, nm.app}
	if prev, ok := ns.tokens[name][t]; ok && prev != app {
		c.fail("W2 violated: node %d leads %s at term %v for app %d, a term node %d led for app %d", id, name, t, nm.app, prev.node, prev.id)
	}
	ns.tokens[name][t] = app
}

// stoodOrFail checks W3: node id names leader l of name, which stood in it.
func (ns *Named) stoodOrFail(c *Checker, name string, id, l election.NodeID) {
	if !ns.ever[name][l] {
		c.fail("W3 violated: node %d names node %d leader of %s, which never stood in it", id, l, name)
	}
}
