// Package election holds the types shared by the leader election algorithms
// (election/ring and election/bully), the Core state machine they plug into,
// and the contract every strategy meets.
//
// Everything in this package and its algorithm subpackages is pure: no
// goroutines, no clocks, no sockets and no locks. Time is counted in ticks,
// randomness is injected through Config.Rand, and effects come out of Ready().
package election

import (
	"errors"
	"fmt"
)

// NodeID names a node. It is unique in a cluster and never zero.
type NodeID uint64

// Term is the fencing token of a leadership. A term is epoch<<SlotBits|slot,
// where slot is the low SlotBits bits of the id of the only node that may lead
// in that term. Two nodes can therefore never lead in the same term, even in
// two halves of a partition that never talk to each other, as long as the ids
// of live members differ in their low SlotBits bits (membership rejects ids
// that collide).
type Term uint64

// SlotBits is how many low bits of a term name the node that owns it.
const SlotBits = 16

const slotMask = 1<<SlotBits - 1

// Epoch is the counter part of a term.
func (t Term) Epoch() uint64 { return uint64(t) >> SlotBits }

// Slot is the owner part of a term.
func (t Term) Slot() uint64 { return uint64(t) & slotMask }

// OwnedBy reports whether id is the node that may lead in term t.
func (t Term) OwnedBy(id NodeID) bool { return t != 0 && t.Slot() == uint64(id)&slotMask }

// MaxEpoch is the highest epoch a term from a peer may have. A correct
// cluster raises the epoch by one per election attempt (a ring hop, a bully
// campaign), plus node.ReserveEpochs+1 per restart: at a thousand attempts a
// second it takes 35 years to reach 2^40. A term above it can only come from
// a bug or a forgery, and taking it would bring the 48-bit epoch within
// reach of wrapping (2^48 - 1 is the last epoch; NextTerm would wrap to a
// term below everything seen). Such a message is refused (ErrTermRange) and
// counted (Status.RefusedTerms); a persisted term above MaxConfigEpoch
// refuses to start.
const MaxEpoch = 1<<40 - 1

// MaxConfigEpoch bounds Config.Term and Config.LeaderTerm: MaxEpoch plus
// room for the store's reserves. A node's own terms then stay below 2^41
// epochs, far from the 2^48 where NextTerm would wrap.
const MaxConfigEpoch = MaxEpoch + 1<<39

// ErrTermRange marks a term beyond MaxEpoch (or MaxConfigEpoch). It wraps
// ErrInvalidMessage when a message carries it.
var ErrTermRange = errors.New("term beyond what a correct cluster reaches")

// ErrNotMember refuses a message from a node that is not a live member, or
// a Coordinator naming one. ErrNotLeaderMsg refuses a TimeoutNow from a
// node other than the leader this node follows. Both wrap nothing; the
// validation error wraps them and ErrInvalidMessage.
var (
	ErrNotMember    = errors.New("not a live member")
	ErrNotLeaderMsg = errors.New("not from the leader")
)

// InRange reports whether a peer may send t (its epoch is at most MaxEpoch).
func (t Term) InRange() bool { return t.Epoch() <= MaxEpoch }

// NextTerm is the smallest term above seen that id owns: one epoch later.
func NextTerm(seen Term, id NodeID) Term {
	return Term((seen.Epoch()+1)<<SlotBits | uint64(id)&slotMask)
}

func (t Term) String() string { return fmt.Sprintf("%d.%d", t.Epoch(), t.Slot()) }

// Rank orders nodes: the higher priority wins, and the higher id breaks ties.
type Rank struct {
	Priority int64
	ID       NodeID
}

// Compare returns -1, 0 or +1 as r ranks below, equal to or above o.
func (r Rank) Compare(o Rank) int {
	switch {
	case r.Priority < o.Priority:
		return -1
	case r.Priority > o.Priority:
		return 1
	case r.ID < o.ID:
		return -1
	case r.ID > o.ID:
		return 1
	}
	return 0
}

// Less reports whether r ranks below o.
func (r Rank) Less(o Rank) bool { return r.Compare(o) < 0 }

// Member is a node as membership reports it.
type Member struct {
	ID       NodeID
	Priority int64
}

// Rank is the member's rank.
func (m Member) Rank() Rank { return Rank{Priority: m.Priority, ID: m.ID} }

// Role is what a node is doing right now.
type Role uint8

const (
	// RoleNoLeader: no leader is known and no election is running here.
	RoleNoLeader Role = iota
	// RoleFollower: a leader and its term are known.
	RoleFollower
	// RoleElecting: this node runs an election or waits for its outcome.
	RoleElecting
	// RoleLeader: this node leads.
	RoleLeader
)

func (r Role) String() string {
	switch r {
	case RoleNoLeader:
		return "no_leader"
	case RoleFollower:
		return "follower"
	case RoleElecting:
		return "electing"
	case RoleLeader:
		return "leader"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// MsgType is the kind of a peer message.
type MsgType uint8

const (
	// MsgElection is the ring's circulating candidate list or the bully's election request.
	MsgElection MsgType = iota + 1
	// MsgAnswer (bully only) is "I am alive and outrank you".
	MsgAnswer
	// MsgCoordinator announces a leader and its term.
	MsgCoordinator
	// MsgCoordinatorAck acknowledges a Coordinator in quorum mode.
	MsgCoordinatorAck
	// MsgHeartbeat goes from a follower to its leader.
	MsgHeartbeat
	// MsgHeartbeatResp answers a heartbeat, or tells a peer of a newer term.
	MsgHeartbeatResp
	// MsgTimeoutNow hands leadership over (transfer), or asks for an election (resign).
	MsgTimeoutNow
	// MsgCandidacy tells a peer the sender's standing in a named election
	// (Election, Confirmed: standing, FromRank.Priority, Value, Term: the
	// term it leads at or 0). The node handles it; no state machine sees it.
	MsgCandidacy
)

// LastMsgType is the highest message type: valid types run from MsgElection
// to LastMsgType. Arrays indexed by type have LastMsgType+1 entries.
const LastMsgType = MsgCandidacy

// Valid reports whether t is a known message type.
func (t MsgType) Valid() bool { return t >= MsgElection && t <= LastMsgType }

var msgNames = [...]string{"", "Election", "Answer", "Coordinator", "CoordinatorAck", "Heartbeat", "HeartbeatResp", "TimeoutNow", "Candidacy"}

func (t MsgType) String() string {
	if int(t) < len(msgNames) && t != 0 {
		return msgNames[t]
	}
	return fmt.Sprintf("msg(%d)", uint8(t))
}

// Message is one peer message. Fields a type does not use are zero.
type Message struct {
	Type MsgType
	From NodeID
	To   NodeID
	// Term: the election attempt's term (Election, Answer), the announced
	// leadership's term (Coordinator, Ack, Heartbeat*), the sender's leadership
	// term (TimeoutNow).
	Term Term
	// Leader: the announced or known leader (Coordinator, Heartbeat*); on a
	// ring Election, the incumbent leader if it forwarded the message.
	Leader NodeID
	// Initiator: who started the election (both algorithms; its term is the
	// initiator's own), or who sent a ring Coordinator around (ring only).
	Initiator NodeID
	// InitiatorRank (ring only): the initiator's rank (suppression compares it).
	InitiatorRank Rank
	// Candidates (ring only): the collected candidate list.
	Candidates []Rank
	// MaxTerm (ring only): the highest term seen by the nodes the Election passed.
	MaxTerm Term
	// FromRank: the sender's rank as it claims it.
	FromRank Rank
	// Reject: a HeartbeatResp that says "not your leader for that term".
	Reject bool
	// Confirmed: a Coordinator that is final (always, outside quorum mode).
	Confirmed bool
	// Elect: a TimeoutNow that asks for an election instead of a hand-over.
	Elect bool
	// Stamp (quorum mode): on a HeartbeatResp from the leader, the leader's
	// clock when it answered, plus one (0: none); the follower promises from
	// then on not to support a rival for a while, and echoes the stamp in
	// its next Heartbeat, which is how the leader knows from when it may
	// count that follower towards its lease.
	Stamp uint64
	// Release (quorum mode): a HeartbeatResp by which a leader that stepped
	// down frees its followers of their promise to it.
	Release bool
	// Support (plain mode): on a Coordinator or HeartbeatResp, the support of
	// the leadership it names: how many members, the leader included, that
	// leader heard from within a leader timeout (a follower names its
	// leader's as the leader last told it). On a TimeoutNow, the support of
	// the leadership handed over, which the successor claims for a leader
	// timeout. 0: not given (an older peer), read as 1. See plain_mode.go.
	// On a ring's Election (quorum mode): the members the round passed
	// through that do not stand (Stand(false): a named election's voters,
	// which forward it without joining it), counted as reachable.
	Support uint32
	// NotStanding: the sender does not stand (StateMachine.Stand(false)).
	// On a follower's Heartbeat, and on the TimeoutNow with which such a
	// node passes on a leadership handed to it; a preempting leader does
	// not hand over to a member that said so.
	NotStanding bool
	// Election: the named election the message belongs to; "" is the
	// node's default election. The state machines never read it: the node
	// routes each message to the machine of its election.
	Election string
	// Value (Candidacy only): the candidacy's value.
	Value string
	// Incarnation (Candidacy only): the sender's incarnation, new at each
	// start of its process; 0 when the sender does not say.
	Incarnation uint64
	// LeaderSince (Candidacy only): when the sender's leadership at Term
	// began, by the sender's wall clock, in Unix nanoseconds; 0 when it
	// does not lead or does not say. The core never reads it.
	LeaderSince int64
	// Held (Candidacy of no election only): a digest of every candidacy of
	// the recipient's that the sender holds, never 0; 0 when the sender
	// does not say. The core never reads it.
	Held uint64
}

// EventType is a local event from membership or the transport.
type EventType uint8

const (
	// EventJoin: a member joined or came back (or changed priority).
	EventJoin EventType = iota + 1
	// EventLeave: a member left cleanly.
	EventLeave
	// EventDead: membership declared a member dead.
	EventDead
	// EventLeaderTimeout: something outside the core suspects the leader.
	EventLeaderTimeout
	// EventSendFailed: a message could not be delivered; Msg says which.
	EventSendFailed
	// EventPeerBusy: the peer's process refused a message this node sent
	// because it is overloaded (its inbox was full); Msg says which. The
	// peer is alive. The node reports Elections only.
	EventPeerBusy
	// EventUnvouched: the host stopped vouching for Member
	// (Config.Vouched). A leader no longer counts what it heard of the
	// member before as heard for a quiet interval (election/quiet.go).
	EventUnvouched
	// EventVouched: the host started vouching for Member, having heard it
	// steadily for a leader timeout. A leader that heard the member within
	// that time counts it for a quiet interval from then (quiet.go).
	EventVouched
	// EventStalled: the host's process stood still (paused, starved) for
	// longer than it vouches across: its members may have timed this node
	// out meanwhile, and what it reads next may have waited through the
	// stall. A leader whose followers keep quiet tells every member at its
	// next round who leads (quiet.go).
	EventStalled
)

// Event is a local event.
type Event struct {
	Type   EventType
	Member Member
	Msg    Message
	// Lead, for EventLeaderTimeout: ticks more that a node ranked below
	// others waits before campaigning (at most a leader timeout). A host
	// that times out one leader in many elections at once says how long
	// failing them all over takes it: the highest survivor, doing the same,
	// announces itself that much later, and a node below that campaigned
	// meanwhile would find it slow to answer and claim beside it.
	Lead int
	// Refused, for EventSendFailed: the receiver's host refused the
	// connection, so its process is gone. A timeout or a reset says only
	// that the path failed, which a live peer survives (a link that heals,
	// a connection stuck in retransmission).
	Refused bool
}

// Leadership is what users see: the role, the leader and its term.
type Leadership struct {
	Role   Role
	Leader NodeID
	Term   Term
}

// Ready is a batch of effects. The caller must persist Term (when it is not
// zero) before it sends Messages.
type Ready struct {
	// Term is the term to persist; zero when it did not change.
	Term Term
	// LeaderTerm is the leadership term to persist (Config.LeaderTerm);
	// zero when it did not change. Persist it before the Change is
	// reported: a restarted node reports it, and must not report less.
	LeaderTerm Term
	// Change is the new leadership when it changed since the last Ready.
	Change *Leadership
	// Messages to send, in order.
	Messages []Message
}

// Status is a snapshot of a node's state.
type Status struct {
	ID         NodeID
	Algorithm  string
	Role       Role
	Leader     NodeID
	LeaderTerm Term
	Term       Term
	Members    int
	Excluded   bool
	// Withdrawn: this node does not stand (StateMachine.Stand): it follows
	// but never leads.
	Withdrawn bool
	// Bootstrapping: a first start still waiting to see BootstrapExpect
	// members before it campaigns on its own.
	Bootstrapping bool
	// RefusesElections: this node refuses Elections now (see
	// ElectionRefuser, and Stand); its node answers them with a refusal,
	// except those of a round this node started (a ring lap come back).
	RefusesElections bool
	Rejected         uint64
	// RefusedTerms counts messages refused for a term beyond MaxEpoch (also
	// counted in Rejected).
	RefusedTerms uint64
	// RefusedMembership counts messages refused because the sender, or the
	// leader a Coordinator names, is not a live member, or a TimeoutNow
	// came from another node than the leader (also counted in Rejected).
	RefusedMembership uint64
	// Quiet (plain mode, a follower): it keeps quiet (Config.Vouched) and
	// will at its next tick too; its one timer is the quiet heartbeat, which
	// its host may send up to a heartbeat interval late, with others
	// (election/quiet.go).
	Quiet bool
	// Now is the state machine's clock, in ticks.
	Now uint64
	// LeaseEnd (quorum mode, leader only): the tick at which the leader's
	// lease runs out unless a majority renews it; the leader claims
	// leadership only before it. 0 otherwise.
	LeaseEnd uint64
}

// StateMachine is the contract every strategy meets. None of its methods
// may be called concurrently: one goroutine (the instance loop) owns it.
type StateMachine interface {
	// Step feeds one peer message. Invalid messages are rejected with an
	// error wrapping ErrInvalidMessage and counted; state does not change.
	Step(m Message) error
	// Tick advances logical time by one tick.
	Tick()
	// Observe feeds a membership or transport event.
	Observe(ev Event)
	// Campaign starts an election now (e.g. an operator asked for one).
	Campaign()
	// Resign steps down; an election runs without this node for that round.
	// In plain mode a leader that has led for a leader timeout hands over to
	// the highest-ranked member it heard from within one, as Transfer does.
	Resign() error
	// Transfer hands leadership to a live member with one message.
	Transfer(to NodeID) error
	// Stand says whether this node is a candidate (true at start). A node
	// that does not stand hands its leadership over as Resign does (or,
	// alone, just stops leading), never campaigns or wins, and passes on a
	// leadership handed to it; it still follows the leader.
	Stand(on bool)
	// HasReady reports whether Ready would return anything.
	HasReady() bool
	// Ready returns and clears the pending effects.
	Ready() Ready
	// Status is a snapshot.
	Status() Status
}

// Advancer is an optional StateMachine feature: Advance(k) does what k
// Ticks do, the ticks that only move counters applied at once (the core's;
// see its Advance).
type Advancer interface {
	Advance(k int)
}

// Hearer is an optional StateMachine feature (the core's): Hears(id)
// reports whether this node leads and counts member id as following that
// leadership now, as its rounds do: heard at the leadership's current
// term, within the window a member counts as heard (a leader timeout after
// its last word, a quiet interval more for a quiet follower).
type Hearer interface {
	Hears(id NodeID) bool
}

// Sentinel errors callers act on.
var (
	ErrNotLeader   = errors.New("election: not the leader")
	ErrUnknownNode = errors.New("election: unknown node")
	ErrNoCandidate = errors.New("election: no other live member to lead")
	// ErrNotStanding refuses a Transfer to a member that said it does not
	// stand (Message.NotStanding): it would pass the leadership back.
	ErrNotStanding    = errors.New("election: the node does not stand")
	ErrInvalidMessage = errors.New("election: invalid message")
)
