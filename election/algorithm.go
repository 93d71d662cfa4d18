package election

// Algorithm is the part of a strategy that differs between ring and bully:
// how an election runs. The core calls it from its own methods only, so it
// inherits the core's contract: never called concurrently. It acts on the
// node only through the Host it is handed.
//
// To add an algorithm: write a package with a type that implements
// Algorithm (and, if it needs them, CoordinatorObserver and MessageChecker),
// a constructor that returns New(cfg, &YourAlgorithm{}), and register it in
// election/algorithms. Nothing else names the algorithms.
type Algorithm interface {
	// Name is the name users configure ("ring", "bully").
	Name() string
	// Campaign starts an election attempt. If the host's Standing says
	// Excluded, this node is resigning and must run the election without
	// itself.
	Campaign(h Host)
	// Step handles the messages that belong to the election procedure:
	// MsgElection and MsgAnswer. The core has already raised the term.
	Step(h Host, m Message)
	// Tick advances the algorithm's own timers; called once per tick, after
	// the core's own tick.
	Tick(h Host)
	// SendFailed is told of a message the transport could not deliver.
	SendFailed(h Host, m Message)
	// Reset drops any election in progress (a leadership was settled).
	Reset()
}

// CoordinatorObserver is an optional Algorithm feature: it is told of every
// valid Coordinator after the core handled it; accepted says whether the
// core took it. The ring passes an older node's lap announcement on.
type CoordinatorObserver interface {
	Coordinated(h Host, m Message, accepted bool)
}

// BusyObserver is an optional Algorithm feature: it is told that a message
// this node sent was refused by its receiver's process as overloaded
// (EventPeerBusy). The message is lost, but the receiver is alive. The
// bully counts such an Election as an Answer. For an algorithm without the
// feature the event is a failed send (Algorithm.SendFailed).
type BusyObserver interface {
	PeerBusy(h Host, m Message)
}

// MessageChecker is an optional Algorithm feature: it checks the fields of
// MsgElection and MsgAnswer that only the algorithm knows, before the core
// takes any notice of the message. A non-empty reason refuses the message
// (it is counted and wrapped in ErrInvalidMessage).
type MessageChecker interface {
	CheckMessage(h Host, m Message) (reason string)
}

// ElectionRefuser is an optional Algorithm feature: an algorithm whose
// RefusesElectionsWhileBootstrapping is true takes no part in an election
// while this node is bootstrapping (Host.Bootstrapping), so its node
// refuses every Election meanwhile, before the machine sees it
// (Status.RefusesElections), and the sender's transport reports the send
// failed (EventSendFailed): the sender skips it as it skips a dead node, at
// once, instead of losing its election in a silent drop. Status reads it
// without asking Host.Bootstrapping, which latches: a snapshot changes
// nothing.
type ElectionRefuser interface {
	RefusesElectionsWhileBootstrapping() bool
}

// SuspicionDelayer is an optional Algorithm feature: when a node loses its
// leader (it timed out, the leader's process is gone, or membership says it
// left), the core asks how many ticks to wait before campaigning, counted
// while the leader is still in Standing. Without it the core campaigns at
// once (or after jitter, for a leader that left). Bully uses it to let the
// highest survivors go first: when every node learns of a crash at the same
// moment (a refused connection), n simultaneous campaigns cost O(n^2)
// messages, a storm that a large cluster under load may never settle.
type SuspicionDelayer interface {
	SuspicionDelay(h Host) int
}

// RankDelay is the ring's SuspicionDelay: one tick for each
// live member that outranks this node, the lost leader (still in Standing)
// aside, at most a leader timeout. The highest survivor waits none.
func RankDelay(h Host) int { return min(RanksAbove(h), h.Config().LeaderTimeoutTicks) }

// RanksAbove is the number of live members that outrank this node, the
// leader in Standing (a lost one) aside.
func RanksAbove(h Host) int {
	st, self := h.Standing(), h.Self()
	above := 0
	for _, r := range h.Ring() {
		if self.Less(r) && r.ID != st.Leader {
			above++
		}
	}
	return above
}

// TickDuer is an optional Algorithm feature for idle nodes: TicksUntilDue
// says how many Ticks from now the algorithm's own timers may next act (1:
// the next Tick may; 0: no timer is armed). Smaller than the truth is safe;
// larger delays a timer. An algorithm without it is asked on every tick.
type TickDuer interface {
	TicksUntilDue(h Host) int
}

// TickSkipper is an optional Algorithm feature that goes with TickDuer:
// SkipTicks(k) does what k Ticks do when none of them is due (k below
// TicksUntilDue, or any k when it is 0): only the algorithm's counters
// move. Advance uses it to apply many idle ticks at once.
type TickSkipper interface {
	SkipTicks(k int)
}

// Standing is what an algorithm may know of this node's position.
type Standing struct {
	// Role, Leader and LeaderTerm are the leadership this node believes in.
	Role       Role
	Leader     NodeID
	LeaderTerm Term
	// Term is the highest term this node has seen.
	Term Term
	// LeaderFresh: this node follows a leader that answered within half a
	// leader timeout.
	LeaderFresh bool
	// Proposing: this node won in quorum mode and waits for a majority to
	// acknowledge it.
	Proposing bool
	// Excluded: this node resigned or handed over and must not stand in the
	// current round.
	Excluded bool
	// Withdrawn: this node does not stand (StateMachine.Stand(false)).
	Withdrawn bool
	// Resigned is the node that just resigned and handed this node the
	// election (0 if none); it does not stand in this round.
	Resigned NodeID
}

// Host is what an algorithm may see of its node and do to it. The core
// implements it; an algorithm gets it as an argument on every call and must
// not keep it past the call.
type Host interface {
	// Config is the node's configuration, defaults filled in.
	Config() Config
	// Self is this node's rank.
	Self() Rank
	// Standing is this node's position now.
	Standing() Standing
	// Ring is the live members and this node sorted by rank, lowest first.
	// The slice is shared: do not modify it.
	Ring() []Rank
	// Successor is the live member ranked next above r, wrapping to the
	// lowest. It may be this node.
	Successor(r Rank) Rank
	// RankOf is a live member's rank, or false when it is not a live member.
	RankOf(id NodeID) (Rank, bool)
	// Bootstrapping reports whether this node is a first start that has not
	// yet seen BootstrapExpect members nor known a leader, and so must not
	// campaign on its own. Asking latches: once the node sees enough members
	// when it asks, it never waits again.
	Bootstrapping() bool

	// Send queues a message; From is filled in.
	Send(m Message)
	// Broadcast sends m to every other live member, highest rank first
	// (the order of the core's own announcements); To and From are filled
	// in.
	Broadcast(m Message)
	// NewAttempt starts an election attempt at a term above any seen, which
	// this node owns, and returns it. The node is electing from now on.
	NewAttempt() Term
	// Win: this node won the election at term t (which it owns). Outside
	// quorum mode it leads at once and announces itself; in quorum mode it
	// proposes and leads once a majority acknowledged.
	Win(t Term)
	// Adopt settles the leadership the algorithm chose: this node leads at t
	// if leader is this node (t must be its own), else it follows leader.
	// Nothing is announced: the algorithm sends what it must. In quorum mode
	// this node proposes itself instead, and leads once a majority
	// acknowledged.
	Adopt(leader NodeID, t Term)
	// NoLeader makes this node leaderless after a failed round (too few
	// candidates, a lost proposal): it campaigns again after a leader
	// timeout plus jitter, so a minority does not spin through terms.
	NoLeader()
	// Reassert has a sitting leader announce itself again at a new term,
	// above every term seen (a lower node ran an election while it leads).
	Reassert()
	// AskLeader has a follower heartbeat its leader now, out of turn (at
	// most once a tick), instead of at its next heartbeat: when another node
	// says the leader is gone, a leader whose process died is then found by
	// the transport's refused connection in a round trip, not one heartbeat
	// interval later. A node that follows no one does nothing.
	AskLeader()
}
