// Package node is the instance loop: one goroutine per node owns the
// election state machine and wires it to the transport, membership, the term
// store and the clock.
package node

import (
	"errors"
	"time"

	"github.com/electord/electord/election"
)

// Leader states as users see them (the JSON and proto "state" field).
const (
	StateLeader   = "leader"
	StateFollower = "follower"
	StateElecting = "electing"
	StateNoLeader = "no_leader"
)

// LeaderInfo is who leads, as this node sees it.
type LeaderInfo struct {
	ID      election.NodeID `json:"id"`
	Name    string          `json:"name"`
	Address string          `json:"address"` // the leader's api address
	Term    election.Term   `json:"term"`
	Since   time.Time       `json:"since"`
	Self    bool            `json:"self"`  // this node leads
	State   string          `json:"state"` // this node's state
	// Election: the named election; "" for the default election.
	Election string `json:"election,omitempty"`
	// Value: a named election's leading candidacy's value.
	Value string `json:"value,omitempty"`
}

// ElectionInfo is one named election as this node sees it.
type ElectionInfo struct {
	Election string     `json:"election"`
	Leader   LeaderInfo `json:"leader"`
	// Candidates: the nodes standing in it, this one included.
	Candidates int `json:"candidates"`
	// Local: the apps campaigning in it through this node.
	Local int `json:"local_candidacies"`
	// CandidateIDs are the nodes standing in it (Candidates of them), for
	// the tallies per node (NamedByNode).
	CandidateIDs []election.NodeID `json:"-"`

	// leaderless is when this node stopped showing a leader of the
	// election, zero while it shows one or never showed one, and lostTerm
	// the term of the leadership it showed last (noteNamed).
	leaderless time.Time
	// leaseUntil (quorum mode, this node leading) is the wall-clock end
	// of the lease the leadership stands on (Unix ns; see Node.leaseView).
	leaseUntil int64
	lostTerm   election.Term
}

// HasLeader reports whether a leader is known.
func (l LeaderInfo) HasLeader() bool { return l.ID != 0 }

// MemberInfo is one member as this node knows it.
type MemberInfo struct {
	ID        election.NodeID `json:"id"`
	Name      string          `json:"name"`
	Priority  int64           `json:"priority"`
	PeerAddr  string          `json:"peer_address"`
	APIAddr   string          `json:"api_address"`
	HTTPAddr  string          `json:"http_address"`
	Alive     bool            `json:"alive"`
	Role      string          `json:"role"` // leader, follower, or "" when unknown
	Term      election.Term   `json:"term"`
	Algorithm string          `json:"algorithm"`
}

// StatusInfo is this node's view of the cluster.
type StatusInfo struct {
	Self      election.NodeID `json:"self_id"`
	Algorithm string          `json:"algorithm"`
	Leader    LeaderInfo      `json:"leader"`
	Members   []MemberInfo    `json:"members"`
	Killed    bool            `json:"killed"`
	// Term is the highest term this node has seen (and persisted).
	Term election.Term `json:"highest_term"`
	// Fault says why the node takes no part in elections, "" when it does
	// (a term it cannot persist).
	Fault string `json:"fault,omitempty"`
	// Standing: this node is a candidate in the default election (false
	// while its candidate probe fails); CandidateProbe is that probe's
	// verdict (nil without one).
	Standing       bool                `json:"standing"`
	CandidateProbe *CandidateProbeInfo `json:"candidate_probe,omitempty"`
}

// Errors callers act on.
var (
	ErrUnknownNode = election.ErrUnknownNode
	ErrNotLeader   = election.ErrNotLeader
	// ErrProbeFailing refuses a Transfer to a member whose candidate probe
	// fails (it said it does not stand).
	ErrProbeFailing = election.ErrNotStanding
	ErrKilled       = errors.New("node: killed (revive it first)")
	ErrStopped      = errors.New("node: stopped")
	// ErrNotAlive refuses a Transfer to a member that is not alive.
	ErrNotAlive = errors.New("node: not alive")
	// ErrPreempted refuses a Resign or Transfer that preemption would undo
	// at once (preempt is on and a live node outranks the new leader).
	ErrPreempted = errors.New("node: preemption would undo it")
	// ErrNotCandidate refuses a named election's Transfer to a node that
	// does not stand in that election.
	ErrNotCandidate = errors.New("node: not a candidate in that election")
)
