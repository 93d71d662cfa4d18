package transport

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
	pb "github.com/electord/electord/proto/electord/v1"
)

// MaxCandidates is the most candidates a ring Election may carry on the wire.
const MaxCandidates = election.MaxCandidates

// ErrInvalidMessage is wrapped by every validation error, on the wire and in
// the state machine: it is election.ErrInvalidMessage. The error text names
// the message type and the offending field, e.g.
// "election: invalid message: Election.to: 7 is not this node (3)".
var ErrInvalidMessage = election.ErrInvalidMessage

// Encode converts m to its wire message: *pb.Election, *pb.Answer,
// *pb.Coordinator, *pb.CoordinatorAck, *pb.Heartbeat, *pb.HeartbeatReply (for
// MsgHeartbeatResp, sent as a Heartbeat's reply or through Notify) or
// *pb.TimeoutNow. Fields the type does not carry on the wire are dropped. It
// fails only for an unknown m.Type; it does not validate m (the receiver does).
//
// The Coordinator's leader_rank has no election.Message field: it is left
// unset, and ignored by Decode.
//
// Safe for concurrent use; the result shares nothing with m.
func Encode(m election.Message) (proto.Message, error) {
	switch m.Type {
	case election.MsgElection:
		var cands []*pb.Rank
		if len(m.Candidates) > 0 {
			cands = make([]*pb.Rank, len(m.Candidates))
			for i, r := range m.Candidates {
				cands[i] = &pb.Rank{Priority: r.Priority, Id: uint64(r.ID)}
			}
		}
		return &pb.Election{
			From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election,
			Initiator:     uint64(m.Initiator),
			Candidates:    cands,
			MaxTerm:       uint64(m.MaxTerm),
			FromRank:      rankToProto(m.FromRank),
			InitiatorRank: rankToProto(m.InitiatorRank),
			Incumbent:     uint64(m.Leader),
			Voters:        m.Support,
		}, nil
	case election.MsgAnswer:
		return &pb.Answer{From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election}, nil
	case election.MsgCoordinator:
		return &pb.Coordinator{
			From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election,
			Leader:     uint64(m.Leader),
			Initiator:  uint64(m.Initiator),
			Confirmed:  m.Confirmed,
			LeaseStamp: m.Stamp,
			Support:    m.Support,
		}, nil
	case election.MsgCoordinatorAck:
		return &pb.CoordinatorAck{From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election}, nil
	case election.MsgHeartbeat:
		return &pb.Heartbeat{From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election, Leader: uint64(m.Leader), LeaseStamp: m.Stamp,
			NotStanding: m.NotStanding}, nil
	case election.MsgHeartbeatResp:
		return &pb.HeartbeatReply{From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election, Leader: uint64(m.Leader), Reject: m.Reject,
			LeaseStamp: m.Stamp, Release: m.Release, Support: m.Support}, nil
	case election.MsgTimeoutNow:
		return &pb.TimeoutNow{From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election, Elect: m.Elect, Support: m.Support,
			NotStanding: m.NotStanding}, nil
	case election.MsgCandidacy:
		return &pb.Candidacy{From: uint64(m.From), To: uint64(m.To), Term: uint64(m.Term), Election: m.Election,
			Standing: m.Confirmed, Priority: m.FromRank.Priority, Value: m.Value, Incarnation: m.Incarnation,
			LeaderSinceUnixNano: m.LeaderSince, Held: m.Held}, nil
	}
	return nil, fmt.Errorf("transport: cannot encode message type %v", m.Type)
}

// Decode converts a wire message received by node self back to an
// election.Message and validates it (see Validate). A ring Election with more
// than MaxCandidates candidates is refused before its list is converted.
//
// Safe for concurrent use; the result shares nothing with x.
func Decode(x proto.Message, self election.NodeID) (election.Message, error) {
	m, err := decode(x)
	if err != nil {
		return election.Message{}, err
	}
	if err := election.CheckMessage(m, self); err != nil {
		return election.Message{}, err
	}
	if m.Election != "" {
		if err := named.CheckName(m.Election); err != nil {
			return election.Message{}, fmt.Errorf("%w: %v.election: %w", ErrInvalidMessage, m.Type, err)
		}
	}
	return m, nil
}

func decode(x proto.Message) (election.Message, error) {
	switch x := x.(type) {
	case *pb.Election:
		if x == nil {
			break
		}
		if n := len(x.GetCandidates()); n > MaxCandidates {
			return election.Message{}, fmt.Errorf("%w: Election.candidates: %d entries, limit %d", ErrInvalidMessage, n, MaxCandidates)
		}
		var cands []election.Rank
		if len(x.GetCandidates()) > 0 {
			cands = make([]election.Rank, len(x.GetCandidates()))
			for i, r := range x.GetCandidates() {
				cands[i] = rankFromProto(r)
			}
		}
		return election.Message{
			Type: election.MsgElection,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection(),
			Initiator:     election.NodeID(x.GetInitiator()),
			Candidates:    cands,
			MaxTerm:       election.Term(x.GetMaxTerm()),
			FromRank:      rankFromProto(x.GetFromRank()),
			InitiatorRank: rankFromProto(x.GetInitiatorRank()),
			Leader:        election.NodeID(x.GetIncumbent()),
			Support:       x.GetVoters(),
		}, nil
	case *pb.Answer:
		if x == nil {
			break
		}
		return election.Message{Type: election.MsgAnswer,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection()}, nil
	case *pb.Coordinator:
		if x == nil {
			break
		}
		return election.Message{Type: election.MsgCoordinator,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection(),
			Leader:    election.NodeID(x.GetLeader()),
			Initiator: election.NodeID(x.GetInitiator()),
			Confirmed: x.GetConfirmed(),
			Stamp:     x.GetLeaseStamp(),
			Support:   x.GetSupport(),
		}, nil
	case *pb.CoordinatorAck:
		if x == nil {
			break
		}
		return election.Message{Type: election.MsgCoordinatorAck,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection()}, nil
	case *pb.Heartbeat:
		if x == nil {
			break
		}
		return election.Message{Type: election.MsgHeartbeat,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection(),
			Leader: election.NodeID(x.GetLeader()), Stamp: x.GetLeaseStamp(), NotStanding: x.GetNotStanding()}, nil
	case *pb.HeartbeatReply:
		if x == nil {
			break
		}
		return election.Message{Type: election.MsgHeartbeatResp,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection(),
			Leader: election.NodeID(x.GetLeader()), Reject: x.GetReject(), Stamp: x.GetLeaseStamp(), Release: x.GetRelease(),
			Support: x.GetSupport()}, nil
	case *pb.TimeoutNow:
		if x == nil {
			break
		}
		return election.Message{Type: election.MsgTimeoutNow,
			From: election.NodeID(x.GetFrom()), To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection(),
			Elect: x.GetElect(), Support: x.GetSupport(), NotStanding: x.GetNotStanding()}, nil
	case *pb.Candidacy:
		if x == nil {
			break
		}
		if n := len(x.GetValue()); n > named.MaxValueLen {
			return election.Message{}, fmt.Errorf("%w: Candidacy.value: %d bytes, limit %d", ErrInvalidMessage, n, named.MaxValueLen)
		}
		from := election.NodeID(x.GetFrom())
		return election.Message{Type: election.MsgCandidacy,
			From: from, To: election.NodeID(x.GetTo()), Term: election.Term(x.GetTerm()), Election: x.GetElection(),
			Confirmed: x.GetStanding(), FromRank: election.Rank{Priority: x.GetPriority(), ID: from}, Value: x.GetValue(),
			Incarnation: x.GetIncarnation(), LeaderSince: x.GetLeaderSinceUnixNano(), Held: x.GetHeld()}, nil
	}
	return election.Message{}, fmt.Errorf("%w: unexpected wire message %T", ErrInvalidMessage, x)
}

func rankToProto(r election.Rank) *pb.Rank {
	if r == (election.Rank{}) {
		return nil
	}
	return &pb.Rank{Priority: r.Priority, Id: uint64(r.ID)}
}

func rankFromProto(r *pb.Rank) election.Rank {
	return election.Rank{Priority: r.GetPriority(), ID: election.NodeID(r.GetId())}
}
