package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
	"github.com/electord/electord/transport"
)

// Config configures a node's loop. Durations are turned into ticks.
type Config struct {
	Self      Meta
	Algorithm string // a name registered in election/algorithms
	// Tick is the loop's clock period. Default 10ms.
	Tick time.Duration
	// HeartbeatInterval: followers heartbeat the leader this often. Default 50ms.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout: a follower suspects its leader after this long without
	// an answer. Default 250ms.
	HeartbeatTimeout time.Duration
	Quorum           int
	Preempt          bool
	// BootstrapExpect: see election.Config.BootstrapExpect.
	BootstrapExpect int
	// Store persists the term; nil keeps it in memory.
	Store *TermStore
	// NewMembership starts gossip; called at start and on Revive.
	NewMembership func() (Membership, error)
	// Transport sends peer messages; the node is its Receiver (see Receiver).
	Transport transport.Transport
	// Exit terminates the process (electctl kill --exit). nil: Exit does nothing.
	Exit   func()
	Logger *slog.Logger
	// InboxSize bounds queued inbound messages. Default 4096.
	InboxSize int
}

func (c *Config) defaults() {
	if c.Tick == 0 {
		c.Tick = 10 * time.Millisecond
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 50 * time.Millisecond
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 250 * time.Millisecond
	}
	if c.InboxSize == 0 {
		c.InboxSize = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Store == nil {
		c.Store, _ = OpenTermStore("")
	}
}

func ticks(d, tick time.Duration) int { return max(1, int((d+tick-1)/tick)) }

// AnswerTimeout bounds a bully node's wait for an Answer from a higher
// node: many round trips on any network electord is meant for, and time
// for a peer that is briefly starved of CPU.
const AnswerTimeout = 30 * time.Millisecond

// electionConfig maps durations to the core's ticks.
func (c *Config) electionConfig(term election.Term) election.Config {
	hb := ticks(c.HeartbeatInterval, c.Tick)
	lt := ticks(c.HeartbeatTimeout, c.Tick)
	lease := max(hb+1, lt-hb)
	if c.Quorum > 0 {
		// A quorum leader counts a follower from the stamp the follower
		// echoes one heartbeat after it got it, so a follower's share of
		// the lease is renewed every interval but dated two intervals back:
		// the slack against a late heartbeat, reply or echo (or a stalled
		// leader) is lease - 2 x interval. The lease is three quarters of
		// the timeout (so at the defaults a follower's promise, lease x 5/4
		// + 2, ends before its own timeout fires; at timeouts of 30 ticks or
		// less it ends with it), and heartbeats go six times per timeout:
		// at the defaults (timeout 600 ms) a 100 ms interval, a 450 ms
		// lease and 250 ms of slack. At four per timeout (150 ms) the slack
		// was 150 ms, and with one follower cut off, two of the other three
		// late by that much on a loaded host lapsed a healthy leader's lease
		// (the one-hour chaos runs' quorum follower-faults; a simulator
		// test, TestQuorumLeaseSlack, pins the slack at these timings).
		hb = min(hb, max(1, lt/6))
		lease = max(hb+1, lt-max(1, lt/4))
	}
	return election.Config{
		ID: c.Self.ID, Priority: c.Self.Priority, Term: term,
		HeartbeatTicks:     hb,
		LeaderTimeoutTicks: lt,
		JitterTicks:        max(1, lt/4),
		// An Answer comes back in one round trip. Allow AnswerTimeout, or a
		// heartbeat interval if shorter: not the interval itself, which
		// idle cost pushed to 200ms, since a bully node waits this long
		// when an Election to a dead higher node is neither answered nor
		// reported failed (its connection half torn down).
		AnswerTimeoutTicks: min(hb, ticks(AnswerTimeout, c.Tick)),
		// A Coordinator (or quorum acks) should follow within a timeout.
		ElectionTimeoutTicks: lt,
		HopTicks:             1,
		Quorum:               c.Quorum,
		LeaseTicks:           lease,
		Preempt:              c.Preempt,
		BootstrapExpect:      c.BootstrapExpect,
	}
}

type memberRec struct {
	Meta
	alive bool
}

type command func()

// Node runs one instance loop. Create it with New, start it with Run.
type Node struct {
	cfg Config
	// cause is what the loop is handling now, for logChange (owned by the loop).
	cause cause
	log   *slog.Logger

	inbox    chan transport.Inbound
	failures chan failure
	// peerDown carries sends that failed with transport.ErrPeerDown: the
	// peer's process is gone (see peerGone).
	peerDown chan election.Message
	cmds     chan command
	clock    *tickClock  // drives sm.Tick; owned by the loop
	serving  atomic.Bool // answers peers (false while killed)

	// Owned by the loop goroutine.
	sm      election.StateMachine
	mem     Membership
	events  <-chan MemberEvent
	members map[election.NodeID]*memberRec
	killed  bool
	leaving bool // Handover began: never report this node as the leader again
	// storeErr: the term could not be persisted. The state machine is
	// frozen (no ticks, no messages in or out) until a retried save
	// succeeds; then a new one starts from the disk (see storeFailed).
	storeErr   error
	pending    Persisted // what the failed saves asked for
	retryC     <-chan time.Time
	retryDelay time.Duration
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
	counters Counters
	obs      observe // observe.go
	// leaseUntil (quorum mode): until when, by the wall clock in Unix
	// nanoseconds, this node may claim leadership; 0 when it may not.
	leaseUntil atomic.Int64
	// leading (quorum mode): this node led at the last updateLease; its
	// clock then applies every tick it missed (see tickClock).
	leading atomic.Bool
}

// Counters are the node's event counts, for metrics and tests.
type Counters struct {
	InboxFull     atomic.Uint64 // inbound messages refused because the inbox was full
	FailuresLost  atomic.Uint64 // send failures not reported to the core (queue full)
	Rejected      atomic.Uint64 // peer messages the core rejected as invalid
	Conflicts     atomic.Uint64 // duplicate ids or term-slot collisions seen in gossip
	LeaderChanges atomic.Uint64
	PersistErrors atomic.Uint64
}

// New builds a node from its persisted term. It does not start anything.
func New(cfg Config) (*Node, error) {
	cfg.defaults()
	if err := algorithms.Check(cfg.Algorithm); err != nil {
		return nil, fmt.Errorf("algorithm: %w", err)
	}
	if cfg.NewMembership == nil || cfg.Transport == nil {
		return nil, errors.New("node: NewMembership and Transport are required")
	}
	n := &Node{
		cfg:          cfg,
		log:          cfg.Logger.With("node", uint64(cfg.Self.ID)),
		inbox:        make(chan transport.Inbound, cfg.InboxSize),
		failures:     make(chan failure, cfg.InboxSize),
		peerDown:     make(chan election.Message, 16),
		cmds:         make(chan command, 16),
		members:      map[election.NodeID]*memberRec{},
		stopped:      make(chan struct{}),
		handoverLost: make(chan struct{}, 1),
		clock:        newTickClock(cfg.Tick),
	}
	if cfg.Quorum > 0 {
		n.clock.catchAll = n.leading.Load
	}
	if err := n.startMachine(); err != nil {
		return nil, err
	}
	n.publish()
	return n, nil
}

// Counters exposes the node's counters.
func (n *Node) Counters() *Counters { return &n.counters }

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
	// If the disk refuses, the first election meets the same refusal and
	// the node stops taking part until a save succeeds (storeFailed), as
	// before this reserve was taken at start.
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
	return nil
}

// ---- transport.Receiver ----

// Receive implements transport.Receiver; called by many goroutines.
func (n *Node) Receive(in transport.Inbound) error {
	if !n.serving.Load() {
		return transport.ErrNotServing
	}
	select {
	case n.inbox <- in:
		return nil
	default:
		n.counters.InboxFull.Add(1)
		return transport.ErrOverloaded
	}
}

// failure is a send the transport could not deliver; busy: an Election a
// node above refused as overloaded (see Failed).
type failure struct {
	m    election.Message
	busy bool
}

// Failed implements transport.Receiver; called by many goroutines.
func (n *Node) Failed(m election.Message, err error) {
	// An Election refused by an overloaded node above (its inbox was full):
	// that node is alive and busy. For the bully that is its Answer, not its
	// death (EventPeerBusy); as a failure, a node whose Election to the
	// highest survivor met its full inbox (128 processes after a crash) won
	// while that node was announcing itself.
	busy := m.Type == election.MsgElection && transport.PeerOverloaded(err)
	if errors.Is(err, transport.ErrPeerDown) {
		select {
		case n.peerDown <- m:
		default: // one report is enough; the heartbeat timeout covers the rest
		}
	}
	select {
	case n.failures <- failure{m, busy}:
	default:
		n.counters.FailuresLost.Add(1) // timeouts recover what this loses
	}
}

// ---- the loop ----

// Run runs the loop until ctx ends. It joins gossip first.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.stopped)
	defer n.hub.closeAll()
	if err := n.joinGossip(); err != nil {
		return err
	}
	n.serving.Store(true)
	n.clock.start()
	defer n.clock.stop()
	for {
		var reply chan election.Message
		var replyTo election.NodeID
		n.cause = cause{}
		select {
		case <-ctx.Done():
			n.serving.Store(false)
			n.withdraw() // peers campaign when they hear of the leave
			n.leaveGossip()
			return nil
		case <-n.clock.C():
			if !n.halted() {
				n.clock.fire()
			}
		case in := <-n.inbox:
			if n.halted() {
				continue
			}
			n.cause = cause{kind: "message", msg: in.Msg}
			n.heard(in.Msg)
			if err := n.sm.Step(in.Msg); err != nil {
				n.counters.Rejected.Add(1)
				n.refused(in.Msg, err)
				n.log.Warn("rejected a peer message", "err", err)
			}
			reply, replyTo = in.Reply, in.Msg.From
		case f := <-n.failures:
			m, kind, typ := f.m, "send failed", election.EventSendFailed
			if f.busy {
				kind, typ = "peer busy", election.EventPeerBusy
			}
			n.cause = cause{kind: kind, msg: m}
			if !n.halted() {
				n.sm.Observe(election.Event{Type: typ, Msg: m})
			}
			if m.Type == election.MsgTimeoutNow && m.To == n.handingTo && m.To != 0 {
				n.handingTo = 0
				select {
				case n.handoverLost <- struct{}{}:
				default:
				}
			}
		case m := <-n.peerDown:
			n.cause = cause{kind: "peer down", msg: m}
			n.peerGone(m)
		case ev, ok := <-n.events:
			if !ok {
				n.events = nil
				continue
			}
			n.cause = cause{kind: "membership", ev: ev}
			n.membershipEvent(ev)
		case c := <-n.cmds:
			n.cause = cause{kind: "command"}
			c()
		case <-n.retryC:
			n.retrySave()
		}
		n.process(reply, replyTo)
		n.updateLease()
		n.clock.arm()
	}
}

// process drains Ready: persist the term, then answer a pending heartbeat
// call, then send, then publish the leadership.
func (n *Node) process(reply chan election.Message, replyTo election.NodeID) {
	if n.halted() || !n.sm.HasReady() {
		if reply != nil {
			close(reply) // no answer
		}
		if n.dirty {
			n.publish()
		}
		return
	}
	rd := n.sm.Ready()
	if n.published.role == election.RoleLeader {
		if st := n.sm.Status(); st.Role != election.RoleLeader || n.leaving {
			n.withdraw() // before anything of the batch goes out, or a failed write returns
		}
	}
	if rd.Term != 0 {
		// A message may carry the new term: it must be durable first, or a
		// restart could mint it again. Send nothing of this batch, stop
		// leading and campaigning, and retry the save.
		if err := n.saveTerm(rd.Term, 0); err != nil {
			n.storeFailed(err, Persisted{Term: rd.Term, LeaderTerm: rd.LeaderTerm})
			if reply != nil {
				close(reply)
			}
			return
		}
	}
	for _, m := range rd.Messages {
		if reply != nil && m.Type == election.MsgHeartbeatResp && m.To == replyTo {
			reply <- m
			reply = nil
			continue
		}
		n.cfg.Transport.Send(m)
	}
	if reply != nil {
		close(reply)
	}
	if rd.LeaderTerm != 0 {
		// The leadership term is what this node reports: durable before it
		// is shown, so a restart never reports a lower one. It is written
		// after the messages went out, so a new leader's announcement and
		// its followers' own writes overlap with this one (a handover costs
		// one write's time, not two in a row). The term itself is durable
		// already (above), so nothing can be minted twice if this fails;
		// the node then stops leading as for any failed write.
		if err := n.saveTerm(0, rd.LeaderTerm); err != nil {
			n.storeFailed(err, Persisted{LeaderTerm: rd.LeaderTerm})
			return
		}
	}
	n.observeReady(&rd)
	if rd.Change != nil {
		n.counters.LeaderChanges.Add(1)
		n.since = time.Now()
		n.logChange(*rd.Change)
		if ch := rd.Change; ch.Role == election.RoleFollower && ch.Leader != n.cfg.Self.ID {
			// A leader taken up on its Coordinator came over its own
			// connection: open ours now, so its crash is seen as a dropped
			// connection at once, not by the next heartbeat a heartbeat
			// interval later (issue 10: the first kill after a leadership
			// change took about 200 ms).
			if c, ok := n.cfg.Transport.(transport.Connector); ok {
				c.Connect(ch.Leader)
			}
		}
	}
	if n.dirty || rd.Change != nil || keyOf(n.sm.Status()) != n.published {
		// Most Readies (a heartbeat answered or sent) leave what publish
		// shows as it was: rebuilding the member list for each would cost
		// O(members) allocations per heartbeat at the leader.
		n.publish()
	}
}

// peerGone handles transport.ErrPeerDown for m.To: its host refused a
// connection to its peer address twice, so its process is gone. If it is
// the leader this node follows, that is the leader's death: campaign now
// (election.EventLeaderTimeout) instead of waiting for the heartbeat
// timeout. Anyone else's death is left to gossip and timeouts, so a refused
// connection to a follower or to a stale address never deposes a leader.
func (n *Node) peerGone(m election.Message) {
	if n.halted() {
		return
	}
	st := n.sm.Status()
	if st.Role != election.RoleFollower || st.Leader != m.To || m.To == 0 {
		return
	}
	n.log.Info("the leader's host refuses connections: campaigning", "leader", uint64(m.To))
	n.sm.Observe(election.Event{Type: election.EventLeaderTimeout})
}

func (n *Node) membershipEvent(ev MemberEvent) {
	id := ev.Member.ID
	if id == n.cfg.Self.ID && ev.Type != MemberConflict {
		return
	}
	switch ev.Type {
	case MemberJoin, MemberUpdate:
		rec := n.members[id]
		if rec == nil {
			rec = &memberRec{}
			n.members[id] = rec
		}
		rec.Meta, rec.alive = ev.Member, true
		n.cfg.Transport.SetPeer(id, ev.Member.PeerAddr)
		if !n.halted() {
			n.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: id, Priority: ev.Member.Priority}})
		}
	case MemberLeave, MemberDead:
		if rec := n.members[id]; rec != nil {
			rec.alive = false
		}
		typ := election.EventDead
		if ev.Type == MemberLeave {
			typ = election.EventLeave
		}
		if !n.halted() {
			n.sm.Observe(election.Event{Type: typ, Member: election.Member{ID: id}})
		}
	case MemberConflict:
		n.counters.Conflicts.Add(1)
		n.log.Error("membership conflict: the node is not let in", "id", uint64(id), "detail", ev.Detail)
		if ev.Yield && !n.killed {
			// This node lost its id or term slot to another claimant (it could
			// mint terms that belong to the other node), or its cluster
			// settings differ from the cluster it meets (it would lead a
			// cluster of one). Stand down until an operator revives it.
			n.log.Error("standing down: fix this node's --id or cluster settings (algorithm, quorum, preempt), then restart it or electctl revive", "detail", ev.Detail)
			// No Leave: gossip matches a leave by name, so leaving would
			// declare the other node, the one gossip admitted, gone.
			n.kill(false)
		}
	}
	n.dirty = true
}

func (n *Node) joinGossip() error {
	mem, err := n.cfg.NewMembership()
	if err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	n.mem, n.events = mem, mem.Events()
	return nil
}

func (n *Node) leaveGossip() {
	if n.mem == nil {
		return
	}
	if err := n.mem.Leave(2 * time.Second); err != nil {
		n.log.Warn("leaving gossip", "err", err)
	}
	if err := n.mem.Shutdown(); err != nil {
		n.log.Warn("stopping gossip", "err", err)
	}
	n.mem, n.events = nil, nil
}

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
// after the batch's sends and writes. A one-hour chaos run (ring, quorum
// 5) saw both answer /leader/self 200 for 0.3 ms when the loop of a
// leader handing over was descheduled between its TimeoutNow and its
// publish. Kill and a stop without a handover withdraw too, before
// leaving gossip (which can take seconds while the peers already campaign).
// Called by the loop only.
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
		n.hub.publish(li)
	}
}

// publish recomputes the published snapshot; called by the loop only.
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
	changed := n.leader.ID != li.ID || n.leader.Term != li.Term || n.leader.State != li.State
	n.leader = li
	n.status = StatusInfo{Self: n.cfg.Self.ID, Algorithm: n.cfg.Algorithm, Leader: li, Members: members, Killed: n.killed, Term: st.Term}
	if n.storeErr != nil {
		n.status.Term = max(n.cfg.Store.Durable().Term, li.Term)
		n.status.Fault = "cannot persist the term: " + n.storeErr.Error()
	}
	n.mu.Unlock()
	if changed {
		n.hub.publish(li)
	}
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

// ---- API (safe for concurrent use) ----

// Self is this node's id.
func (n *Node) Self() election.NodeID { return n.cfg.Self.ID }

// Leader is who leads, as this node sees it.
func (n *Node) Leader() LeaderInfo {
	n.mu.RLock()
	li := n.leader
	n.mu.RUnlock()
	if li.Self && !n.leaseHeld() {
		// Quorum mode: the lease ran out by the wall clock, although the
		// loop (paused, starved) has not stepped down yet. Claim nothing.
		li = LeaderInfo{State: StateNoLeader, Term: li.Term}
	}
	return li
}

// leaseHeld reports whether this node may claim leadership now: always
// outside quorum mode; in quorum mode only before its lease's end by the
// wall clock, checked on every call.
func (n *Node) leaseHeld() bool {
	return n.cfg.Quorum == 0 || time.Now().UnixNano() < n.leaseUntil.Load()
}

// updateLease publishes, in quorum mode, the wall-clock end of this node's
// lease: the state machine's lease end in ticks, counted from when its
// clock's last tick fell due (never later than when the lease's ticks
// really began, so the estimate errs early).
func (n *Node) updateLease() {
	if n.cfg.Quorum == 0 {
		return
	}
	var until int64
	st := n.sm.Status()
	n.leading.Store(st.Role == election.RoleLeader)
	if st.Role == election.RoleLeader && st.LeaseEnd > st.Now && !n.halted() && !n.leaving {
		until = n.clock.tickWall().Add(time.Duration(st.LeaseEnd-st.Now) * n.cfg.Tick).UnixNano()
	}
	n.leaseUntil.Store(until)
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
func (n *Node) Subscribe() *Subscription { return n.hub.add(n.Leader) }

// DroppedEvents counts leadership events lost by slow subscribers.
func (n *Node) DroppedEvents() uint64 { return n.hub.dropped.Load() }

// do runs f on the loop and waits for it.
func (n *Node) do(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	select {
	case n.cmds <- func() { done <- f() }:
	case <-n.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-n.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Resign steps down; an election runs without this node.
func (n *Node) Resign(ctx context.Context) error {
	return n.do(ctx, func() error {
		if err := n.refuseCommand(); err != nil {
			return err
		}
		if err := n.preemptUndoes(0); err != nil {
			return err
		}
		return n.sm.Resign()
	})
}

// Transfer hands leadership to id.
func (n *Node) Transfer(ctx context.Context, id election.NodeID) error {
	return n.do(ctx, func() error {
		if err := n.refuseCommand(); err != nil {
			return err
		}
		if rec := n.members[id]; rec != nil && !rec.alive {
			return refusal{ErrNotAlive, fmt.Sprintf("transfer: node %d is a member but not alive (killed, stopped or cut off): it cannot lead now", id)}
		}
		if err := n.preemptUndoes(id); err != nil {
			return err
		}
		return n.sm.Transfer(id)
	})
}

// preemptUndoes refuses, when preempt is on and this node leads, a
// handover that preemption would undo at once: a Resign (to is 0) of the
// best-ranked live node, which takes leadership back, or a Transfer to a
// node that a live member (this one included) outranks, which deposes it.
func (n *Node) preemptUndoes(to election.NodeID) error {
	if !n.cfg.Preempt || n.sm.Status().Role != election.RoleLeader {
		return nil
	}
	self := n.cfg.Self
	best := election.Rank{Priority: self.Priority, ID: self.ID}
	for id, rec := range n.members {
		if r := (election.Rank{Priority: rec.Priority, ID: id}); rec.alive && id != to && best.Less(r) {
			best = r
		}
	}
	if to == 0 {
		if best.ID != self.ID {
			return nil
		}
		return refusal{ErrPreempted, fmt.Sprintf("resign refused: preempt is on and node %d outranks every live member, so it would take leadership back at once; "+
			"to move leadership, stop node %d (SIGTERM hands over) or give another node a higher priority", self.ID, self.ID)}
	}
	rec := n.members[to]
	if to == self.ID || rec == nil {
		return nil
	}
	if (election.Rank{Priority: rec.Priority, ID: to}).Less(best) {
		return refusal{ErrPreempted, fmt.Sprintf("transfer refused: preempt is on and node %d (priority %d) outranks node %d (priority %d), so it would depose node %d at once; "+
			"give node %d the highest priority, or run without preempt", best.ID, best.Priority, to, rec.Priority, to, to)}
	}
	return nil
}

// refusal is a command refused with a message of its own; it wraps kind.
type refusal struct {
	kind error
	msg  string
}

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return r.kind }

// Handover prepares this node to stop (SIGTERM): from now on it never
// reports itself as the leader (Leader, /leader/self). If it leads, it
// transfers its leadership to the best-ranked live member (highest
// priority, then id) and waits, at most wait, until it sees another node
// lead, so the cluster is leaderless only for the transfer's round trip,
// then lingers one heartbeat interval so every follower hears of the new
// leader before this node leaves; it stops waiting early if the transfer
// message could not be delivered.
// It returns the member it handed over to, 0 if it did not lead or had no
// one to hand over to. A node that does not lead returns at once. The
// caller then stops the node (its Run's context).
func (n *Node) Handover(ctx context.Context, wait time.Duration) (election.NodeID, error) {
	sub := n.Subscribe()
	defer sub.Close()
	var to election.NodeID
	err := n.do(ctx, func() error {
		n.leaving, n.dirty = true, true
		if n.halted() || n.sm.Status().Role != election.RoleLeader {
			return nil
		}
		for id, rec := range n.members {
			if best := n.members[to]; rec.alive && (best == nil || cmp.Or(cmp.Compare(rec.Priority, best.Priority), cmp.Compare(id, to)) > 0) {
				to = id
			}
		}
		if to == 0 {
			return nil
		}
		n.handingTo = to
		return n.sm.Transfer(to)
	})
	if err != nil || to == 0 {
		return to, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case li, ok := <-sub.C():
			if !ok {
				return to, ErrStopped
			}
			if li.ID != 0 && li.ID != n.cfg.Self.ID {
				// Linger one heartbeat interval, still answering peers: a
				// follower the new leader's announcement has not reached
				// yet learns of it from its next heartbeat's answer, and
				// does not campaign when this node leaves.
				linger := time.NewTimer(n.cfg.HeartbeatInterval + 2*n.cfg.Tick)
				defer linger.Stop()
				select {
				case <-linger.C:
				case <-ctx.Done():
				}
				return to, nil
			}
		case <-n.handoverLost:
			return to, fmt.Errorf("node: the handover to %d could not be delivered", to)
		case <-timer.C:
			return to, fmt.Errorf("node: handed over to %d, but no new leader was seen within %v", to, wait)
		case <-ctx.Done():
			return to, ctx.Err()
		}
	}
}

// Kill makes the node crash-stop as far as its peers can tell: it stops
// answering them, stops its state machine and leaves gossip. The process
// and its persisted term stay; its client API answers Unavailable except to
// Kill and Revive (see api), so clients move on to another endpoint.
func (n *Node) Kill(ctx context.Context) error {
	return n.do(ctx, func() error {
		n.kill(true)
		return nil
	})
}

// kill stops the node as its peers see it. leave says whether to leave
// gossip cleanly (announcing it) or just stop gossiping.
func (n *Node) kill(leave bool) {
	if n.killed {
		return
	}
	n.killed, n.dirty = true, true
	n.serving.Store(false)
	n.withdraw() // before the leave, which can take seconds
	if leave {
		n.leaveGossip()
	} else if n.mem != nil {
		if err := n.mem.Shutdown(); err != nil {
			n.log.Warn("stopping gossip", "err", err)
		}
		n.mem, n.events = nil, nil
	}
	n.drainInbox()
}

// Revive undoes Kill: the state machine restarts from the persisted term
// and the node joins gossip again.
func (n *Node) Revive(ctx context.Context) error {
	return n.do(ctx, func() error {
		if !n.killed {
			return nil
		}
		if err := n.startMachine(); err != nil {
			return err
		}
		for _, rec := range n.members {
			rec.alive = false
		}
		if err := n.joinGossip(); err != nil {
			return err
		}
		n.killed, n.dirty = false, true
		n.serving.Store(!n.halted())
		return nil
	})
}

func (n *Node) drainInbox() {
	for {
		select {
		case in := <-n.inbox:
			if in.Reply != nil {
				close(in.Reply)
			}
		default:
			return
		}
	}
}

// Exit terminates the process, if the node was given a way to.
func (n *Node) Exit() {
	if n.cfg.Exit != nil {
		n.cfg.Exit()
	}
}

// Done is closed when Run has returned.
func (n *Node) Done() <-chan struct{} { return n.stopped }

// halted reports whether the state machine must not run: the node is
// killed, or its term store refused a save.
func (n *Node) halted() bool { return n.killed || n.storeErr != nil }

// ErrNoStore: the node cannot persist its term and takes no part in
// elections until it can (Status.Fault says why).
var ErrNoStore = errors.New("node: cannot persist the term; not taking part until the disk takes writes again")

func (n *Node) refuseCommand() error {
	switch {
	case n.killed:
		return ErrKilled
	case n.storeErr != nil:
		return fmt.Errorf("%w: %v", ErrNoStore, n.storeErr)
	}
	return nil
}

// Retry bounds for a failed term save.
const (
	saveRetryMin = 50 * time.Millisecond
	saveRetryMax = 5 * time.Second
)

// storeFailed handles a save the term store refused (a full or read-only
// disk, a volume the process cannot write). Nothing of the batch was sent.
// The node stops answering peers (their sends fail, so they elect without
// it), reports no leader and a fault (Health, /healthz 503), and retries the
// save with back-off. The frozen state machine may hold a leadership or an
// attempt at a term the disk never took: it is thrown away when the save
// succeeds, and a new one starts from the disk, above every term the old
// one used, so no two leaderships ever share a term.
func (n *Node) storeFailed(err error, want Persisted) {
	n.counters.PersistErrors.Add(1)
	n.pending.Term = max(n.pending.Term, want.Term)
	n.pending.LeaderTerm = max(n.pending.LeaderTerm, want.LeaderTerm)
	if n.storeErr == nil {
		n.log.Error("cannot persist the term: not leading nor campaigning until the disk takes writes again",
			"term", n.pending.Term.String(), "fencing_token", uint64(n.pending.Term), "err", err)
		n.retryDelay = saveRetryMin
	} else {
		n.retryDelay = min(2*n.retryDelay, saveRetryMax)
	}
	n.storeErr, n.dirty = err, true
	n.serving.Store(false)
	n.leading.Store(false)
	n.leaseUntil.Store(0)
	n.drainInbox()
	n.retryC = time.After(n.retryDelay)
}

// retrySave tries the failed save again; on success the node takes part
// again with a new state machine started from the disk.
func (n *Node) retrySave() {
	n.retryC = nil
	if n.storeErr == nil {
		return
	}
	// The frozen machine's highest term covers every term it may have
	// used, persisted or not.
	st := n.sm.Status()
	want := Persisted{Term: max(n.pending.Term, st.Term), LeaderTerm: n.pending.LeaderTerm}
	if err := n.saveTerm(want.Term, want.LeaderTerm); err != nil {
		n.storeFailed(err, want)
		return
	}
	if err := n.startMachine(); err != nil {
		n.storeFailed(err, want)
		return
	}
	t := n.cfg.Store.Durable().Term
	n.log.Info("the term is persisted again: taking part in elections", "term", t.String(), "fencing_token", uint64(t))
	n.storeErr, n.pending, n.dirty = nil, Persisted{}, true
	for id, rec := range n.members {
		if rec.alive {
			n.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: id, Priority: rec.Priority}})
		}
	}
	if !n.killed {
		n.serving.Store(true)
	}
}

// Health is nil while the node can take part in elections, else why not.
func (n *Node) Health() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.status.Fault != "" {
		return errors.New(n.status.Fault)
	}
	return nil
}
