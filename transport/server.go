package transport

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/transport/peerauth"
)

// MaxHeartbeatWait bounds how long the server waits for the node to answer a
// Heartbeat when the caller set no earlier deadline.
const MaxHeartbeatWait = 10 * time.Second

// PeerService implements pb.PeerServer on top of a Receiver for one node. It
// decodes and validates every message (see Decode), hands it to the
// Receiver, and maps the Receiver's errors to gRPC codes: ErrNotServing →
// Unavailable, ErrOverloaded → ResourceExhausted, ErrNotReady →
// FailedPrecondition, an invalid message →
// InvalidArgument (with the reason), anything else → Internal.
//
// It does not depend on a grpc.Server: register it on any
// grpc.ServiceRegistrar, or use NewGRPCServer. Its methods are safe for
// concurrent use.
type PeerService struct {
	pb.UnimplementedPeerServer

	self election.NodeID
	recv Receiver
	// cluster, set by BindIdentity, is the cluster whose node certificates
	// identify callers over TLS.
	cluster string

	received           [election.LastMsgType + 1]atomic.Uint64
	rejectedInvalid    atomic.Uint64
	rejectedNotServing atomic.Uint64
	rejectedOverloaded atomic.Uint64
	rejectedOther      atomic.Uint64
	rejectedNotReady   atomic.Uint64
	rejectedIdentity   atomic.Uint64
	rejectedBudget     atomic.Uint64
	budgetInFlight     atomic.Int64 // streams holding a BufferBudget slot
	heartbeatsUnanswer atomic.Uint64

	// log, if set (SetLogger), gets a WARN line for refused messages, at
	// most one a second (the counters count every one).
	log     atomic.Pointer[slog.Logger]
	lastLog atomic.Int64 // UnixNano of the last such line
}

// SetLogger makes the service log refused messages (invalid, or from a
// caller whose certificate names another node) at WARN, at most one line a
// second.
func (s *PeerService) SetLogger(l *slog.Logger) { s.log.Store(l) }

// logRefusal logs a refused message, unless one was logged less than a
// second ago.
func (s *PeerService) logRefusal(what string, err error) {
	log := s.log.Load()
	if log == nil {
		return
	}
	now, last := time.Now().UnixNano(), s.lastLog.Load()
	if now-last < int64(time.Second) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	log.Warn("peer port: refused a message (further refusals within 1 s are only counted)", "what", what, "err", err)
}

var _ pb.PeerServer = (*PeerService)(nil)

// NewPeerService returns the peer service of node self, delivering to r.
func NewPeerService(self election.NodeID, r Receiver) *PeerService {
	return &PeerService{self: self, recv: r}
}

// BindIdentity makes the service bind each message to the identity the
// caller proved: on a call that came over TLS (either peer server fills
// grpc-go's peer.Peer.AuthInfo with credentials.TLSInfo), the message's From
// must be the node named by the connection's verified certificate, a
// spiffe://<cluster>/node/<id> URI SAN (peerauth.NodeIDFromCert). A message
// that fails this is refused with PermissionDenied, naming both ids, and
// counted in ServerStats.RejectedIdentity: the caller is authenticated but
// not allowed to speak for From (InvalidArgument stays for malformed
// messages). A call over TLS to a service that was never bound is refused
// the same way (fail closed). Calls without TLS are not checked: with TLS
// off nothing changes. Call it before serving.
func (s *PeerService) BindIdentity(cluster string) { s.cluster = cluster }

// ServerStats is a snapshot of a PeerService's counters.
type ServerStats struct {
	// Received counts messages the Receiver accepted, by type.
	Received map[election.MsgType]uint64
	// RejectedInvalid counts messages that failed wire validation.
	RejectedInvalid uint64
	// RejectedNotServing counts messages refused with ErrNotServing.
	RejectedNotServing uint64
	// RejectedOverloaded counts messages refused with ErrOverloaded.
	RejectedOverloaded uint64
	// RejectedOther counts messages refused with any other Receiver error.
	RejectedOther uint64
	// RejectedNotReady counts Elections refused with ErrNotReady.
	RejectedNotReady uint64
	// RejectedIdentity counts messages refused because their From is not
	// the node the TLS connection's certificate names (see BindIdentity).
	RejectedIdentity uint64
	// RejectedBudget counts calls a grpc-go server refused because the
	// streams its BufferBudget allows were all in flight.
	RejectedBudget uint64
	// StreamsInFlight is the streams holding a BufferBudget slot now.
	StreamsInFlight int64
	// HeartbeatsUnanswered counts accepted Heartbeats whose call ended
	// (deadline, cancel, or the node closed Reply) before the node answered.
	HeartbeatsUnanswered uint64
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (s *PeerService) Stats() ServerStats {
	st := ServerStats{
		Received:             make(map[election.MsgType]uint64),
		RejectedInvalid:      s.rejectedInvalid.Load(),
		RejectedNotServing:   s.rejectedNotServing.Load(),
		RejectedOverloaded:   s.rejectedOverloaded.Load(),
		RejectedOther:        s.rejectedOther.Load(),
		RejectedNotReady:     s.rejectedNotReady.Load(),
		RejectedIdentity:     s.rejectedIdentity.Load(),
		RejectedBudget:       s.rejectedBudget.Load(),
		StreamsInFlight:      s.budgetInFlight.Load(),
		HeartbeatsUnanswered: s.heartbeatsUnanswer.Load(),
	}
	for t := election.MsgElection; t <= election.LastMsgType; t++ {
		if n := s.received[t].Load(); n > 0 {
			st.Received[t] = n
		}
	}
	return st
}

// deliver decodes x, checks it against the caller's identity (see
// BindIdentity) and hands it to the Receiver with reply (nil except for a
// Heartbeat).
func (s *PeerService) deliver(ctx context.Context, x proto.Message, reply chan election.Message) error {
	m, err := Decode(x, s.self)
	if err != nil {
		s.rejectedInvalid.Add(1)
		s.logRefusal("invalid message", err)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.checkSender(ctx, m.From); err != nil {
		s.rejectedIdentity.Add(1)
		s.logRefusal("sender differs from the certificate", err)
		return err
	}
	if err := s.recv.Receive(Inbound{Msg: m, Reply: reply}); err != nil {
		switch {
		case errors.Is(err, ErrNotServing):
			s.rejectedNotServing.Add(1)
			return status.Error(codes.Unavailable, err.Error())
		case errors.Is(err, ErrOverloaded):
			s.rejectedOverloaded.Add(1)
			return status.Error(codes.ResourceExhausted, err.Error())
		case errors.Is(err, ErrNotReady):
			s.rejectedNotReady.Add(1)
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		s.rejectedOther.Add(1)
		return status.Error(codes.Internal, err.Error())
	}
	s.received[m.Type].Add(1)
	return nil
}

// checkSender refuses a message from a TLS caller whose certificate does
// not name from.
func (s *PeerService) checkSender(ctx context.Context, from election.NodeID) error {
	id, overTLS, err := peerauth.NodeFromContext(ctx, s.cluster)
	switch {
	case !overTLS:
		return nil
	case err != nil:
		return status.Errorf(codes.PermissionDenied, "transport: message from node %d: %v", from, err)
	case id != from:
		return status.Errorf(codes.PermissionDenied, "transport: message says it is from node %d but the connection's certificate names node %d", from, id)
	}
	return nil
}

func (s *PeerService) oneWay(ctx context.Context, x proto.Message) (*pb.Ack, error) {
	if err := s.deliver(ctx, x, nil); err != nil {
		return nil, err
	}
	return &pb.Ack{}, nil
}

// Election implements pb.PeerServer.
func (s *PeerService) Election(ctx context.Context, x *pb.Election) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// Answer implements pb.PeerServer.
func (s *PeerService) Answer(ctx context.Context, x *pb.Answer) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// Coordinator implements pb.PeerServer.
func (s *PeerService) Coordinator(ctx context.Context, x *pb.Coordinator) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// CoordinatorAck implements pb.PeerServer.
func (s *PeerService) CoordinatorAck(ctx context.Context, x *pb.CoordinatorAck) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// TimeoutNow implements pb.PeerServer.
func (s *PeerService) TimeoutNow(ctx context.Context, x *pb.TimeoutNow) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// Notify implements pb.PeerServer: it delivers a MsgHeartbeatResp that
// answers no Heartbeat call.
func (s *PeerService) Notify(ctx context.Context, x *pb.HeartbeatReply) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// Candidacy implements pb.PeerServer: it delivers a MsgCandidacy.
func (s *PeerService) Candidacy(ctx context.Context, x *pb.Candidacy) (*pb.Ack, error) {
	return s.oneWay(ctx, x)
}

// Heartbeat implements pb.PeerServer. It delivers the Heartbeat with a Reply
// channel (buffered, 1) and waits for the node's answer, the call's end
// (deadline → DeadlineExceeded, cancel → Canceled) or MaxHeartbeatWait. The
// node should answer with a MsgHeartbeatResp; it may close Reply instead to
// refuse an answer (→ Aborted). An answer sent after the call ended is
// dropped by the buffer and never blocks the node.
func (s *PeerService) Heartbeat(ctx context.Context, x *pb.Heartbeat) (*pb.HeartbeatReply, error) {
	reply := make(chan election.Message, 1)
	if err := s.deliver(ctx, x, reply); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, MaxHeartbeatWait)
	defer cancel()
	return s.awaitHeartbeat(ctx, reply)
}

// awaitHeartbeat waits for the node's answer to a delivered Heartbeat on
// reply, until ctx ends.
func (s *PeerService) awaitHeartbeat(ctx context.Context, reply chan election.Message) (*pb.HeartbeatReply, error) {
	select {
	case r, ok := <-reply:
		if !ok {
			s.heartbeatsUnanswer.Add(1)
			return nil, status.Error(codes.Aborted, "transport: node gave no heartbeat reply")
		}
		if r.Type != election.MsgHeartbeatResp {
			return nil, status.Errorf(codes.Internal, "transport: node answered a heartbeat with %v", r.Type)
		}
		enc, err := Encode(r)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return enc.(*pb.HeartbeatReply), nil
	case <-ctx.Done():
		s.heartbeatsUnanswer.Add(1)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// MessageSizeOptions are the grpc.ServerOptions of a peer server whose
// largest message is maxMessageBytes (the max-message-bytes key): the
// receive limit, beyond which a message is refused with ResourceExhausted
// before it is decoded, and static flow-control windows of one message.
func MessageSizeOptions(maxMessageBytes int) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes),
		// No BDP pings on inbound messages either (see staticWindow).
		grpc.StaticStreamWindowSize(staticWindow(maxMessageBytes)),
		grpc.StaticConnWindowSize(staticWindow(maxMessageBytes))}
}

// NewGRPCServer returns a grpc.Server with svc registered and the receive
// size limit set to maxMessageBytes (the max-message-bytes key, required:
// see MessageSizeOptions), so a larger message is refused with
// ResourceExhausted before it is decoded. opts are applied after it.
func NewGRPCServer(svc *PeerService, maxMessageBytes int, opts ...grpc.ServerOption) *grpc.Server {
	all := append(MessageSizeOptions(maxMessageBytes), opts...)
	srv := grpc.NewServer(all...)
	pb.RegisterPeerServer(srv, svc)
	return srv
}
