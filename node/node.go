package node

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

type memberRec struct {
	Meta
	alive bool
	// aliveAt: the value of Node.revivals when the member last became
	// alive (gossip's join); what this node broadcast later reached it.
	aliveAt uint64
}

type command func()

// Node runs one instance loop. Create it with New, start it with Run.
type Node struct {
	cfg Config
	// cause is what the loop is handling now, for logChange (owned by the loop).
	cause cause
	log   *slog.Logger

	in    *Inbox // what peers sent and which sends failed
	cmds  chan command
	clock *tickClock // drives sm.Tick; owned by the loop

	// Owned by the loop goroutine.
	sm     election.StateMachine
	mem    Membership
	events <-chan MemberEvent
	// gossipSynced: the events of gossip's first join have been taken
	// (SyncReporter), so members the node does not know of are not
	// merely on their way.
	gossipSynced bool
	members      map[election.NodeID]*memberRec
	// revivals counts the members that became alive (memberRec.aliveAt).
	revivals uint64
	killed   bool
	leaving  bool // Handover began: never report this node as the leader again
	// storeErr: the term could not be persisted. The state machine is
	// frozen (no ticks, no messages in or out) until a retried save
	// succeeds; then a new one starts from the disk (see storeFailed).
	storeErr   error
	pending    Persisted // what the failed saves asked for
	retryC     <-chan time.Time
	retryDelay time.Duration
	// deaths holds gossip's death verdicts about members still heard from
	// (helddeath.go).
	deaths heldDeaths
	// handingTo is the member Handover sent its leadership to, until that
	// message failed; handoverLost says it failed.
	handingTo    election.NodeID
	handoverLost chan struct{}
	dirty        bool // membership or killed changed since the last publish
	// published is what the last publish read from the state machine.
	published statusKey
	since     time.Time

	// Published for other goroutines.
	mu       sync.RWMutex
	leader   LeaderInfo
	status   StatusInfo
	hub      hub
	stopped  chan struct{}
	counters *Counters // shared with the inbox
	obs      observe   // observe.go
	// leaseUntil (quorum mode): until when, by the wall clock in Unix
	// nanoseconds, this node may claim leadership; 0 when it may not.
	leaseUntil atomic.Int64
	// leading (quorum mode): this node led at the last updateLease; its
	// clock then applies every tick it missed (see tickClock).
	leading atomic.Bool
	// ann publishes to the hub what Leader answers (announce.go);
	// announceDue (owned by the loop): publish changed what it answers.
	ann         announcer
	announceDue bool

	// named is the node's named elections (named.go), owned by the loop;
	// elections is what readers see of them (under mu).
	named     *namedState
	elections map[string]ElectionInfo

	// candidateProbe is the candidate probe's last verdict (standing.go), nil
	// without a probe; owned by the loop.
	candidateProbe *CandidateProbeInfo
}

// Counters are the node's event counts, for metrics and tests.
type Counters struct {
	InboxFull    atomic.Uint64 // inbound messages refused because the inbox was full
	FailuresLost atomic.Uint64 // send failures not reported to the core (queue full)
	// NamedBackpressure counts named elections' sends a live peer refused
	// as overloaded, not reported to their elections (Inbox.Failed).
	NamedBackpressure atomic.Uint64
	Rejected          atomic.Uint64 // peer messages the core rejected as invalid
	Conflicts         atomic.Uint64 // duplicate ids or term-slot collisions seen in gossip
	LeaderChanges     atomic.Uint64
	PersistErrors     atomic.Uint64
	// NamedLeaderChanges: changes of a named election's leadership as this
	// node shows it (noteNamed).
	NamedLeaderChanges atomic.Uint64
}

// New builds a node from its persisted term. It does not start anything.
func New(cfg Config) (*Node, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := algorithms.Check(cfg.Algorithm); err != nil {
		return nil, fmt.Errorf("algorithm: %w", err)
	}
	if cfg.NewMembership == nil || cfg.Transport == nil || cfg.Inbox == nil {
		return nil, errors.New("node: NewMembership, Transport and Inbox are required")
	}
	n := &Node{
		cfg:          cfg,
		log:          cfg.Logger.With("node", uint64(cfg.Self.ID)),
		in:           cfg.Inbox,
		counters:     cfg.Inbox.counters,
		cmds:         make(chan command, 16),
		members:      map[election.NodeID]*memberRec{},
		stopped:      make(chan struct{}),
		handoverLost: make(chan struct{}, 1),
		clock:        newTickClock(cfg.Tick),
	}
	if cfg.Quorum > 0 {
		n.clock.catchAll = n.leading.Load
	}
	if cfg.CandidateProbe != "" {
		n.candidateProbe = candidateProbeStart(cfg.CandidateProbe)
	}
	if err := n.startMachine(); err != nil {
		return nil, err
	}
	if err := n.initNamed(); err != nil {
		return nil, err
	}
	n.publish()
	n.ann.last, n.announceDue = n.Leader(), false // no one watched it before
	return n, nil
}

// Counters exposes the node's counters.
func (n *Node) Counters() *Counters { return n.counters }

func (n *Node) startMachine() error {
	saved, err := n.cfg.Store.Load()
	if err != nil {
		return err
	}
	// A restart starts from the reserve the term file holds, so the first
	// election after it mints a term above the reserve, and would wait for
	// the term file's full write (write, fsync, rename, fsync of the dir:
	// 60-250 ms on a loaded disk) before its first message goes out: on the
	// critical path of a failover the restarted node takes part in. Reserve
	// the next terms now, before the node takes part.
	// A refusal here is only logged: the first election meets the same
	// refusal and the node stops taking part until a save succeeds
	// (storeFailed).
	if next := election.NextTerm(saved.Term, n.cfg.Self.ID); next.InRange() {
		if err := n.cfg.Store.Save(next, 0); err != nil {
			n.log.Warn("cannot reserve the next terms at start; the first election will try again", "err", err)
		}
	}
	ecfg := n.cfg.electionConfig(saved.Term)
	ecfg.LeaderTerm = saved.LeaderTerm
	sm, err := algorithms.New(n.cfg.Algorithm, ecfg)
	if err != nil {
		return err
	}
	n.sm = n.clock.wrap(sm)
	// A new machine (a start, a revive, a recovered disk) stands as the
	// candidate probe last said.
	n.sm.Stand(n.standing())
	return nil
}

// Self is this node's id.
func (n *Node) Self() election.NodeID { return n.cfg.Self.ID }

// Done is closed when Run has returned.
func (n *Node) Done() <-chan struct{} { return n.stopped }

// halted reports whether the state machine must not run: the node is
// killed, or its term store refused a save.
func (n *Node) halted() bool { return n.killed || n.storeErr != nil }
