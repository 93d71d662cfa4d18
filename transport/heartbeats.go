package transport

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
)

// Coalesced heartbeats: the Heartbeats of named elections queued for one
// peer go in one call (pb.Heartbeats), answered one by one. A follower
// heartbeats its leader in every election they share; one unary call each,
// one after the other on the peer's queue, each waiting for its answer, was
// a hundred calls per node pair and heartbeat period at a hundred
// elections: the queue (256) filled with them on a loaded host, the
// heartbeats that did not fit failed, their elections suspected a live
// leader, and a leader's death was seen only once the calls queued before
// the failing one had each failed in turn. The named machines share one
// clock, so the heartbeats due at one tick are queued together and leave in
// one call: a node pair costs at most one call per tick however many
// elections it shares.

// coalescable says whether m may travel in a Heartbeats call: a named
// election's Heartbeat. The default election's Heartbeat keeps its own call,
// byte for byte, as every node of every version reads it.
func coalescable(m election.Message) bool {
	return m.Type == election.MsgHeartbeat && m.Election != ""
}

// heartbeatsLink is a link that can carry several Heartbeats in one call.
type heartbeatsLink interface {
	// sendHeartbeats carries ms (all coalescable, for the same peer), hands
	// each answer to the Receiver and reports each failure, as send does
	// for one Heartbeat. It returns true when a call reached its own
	// deadline while ctx was still live.
	sendHeartbeats(ctx context.Context, ms []election.Message) (silent bool)
}

// Heartbeats implements pb.PeerServer: each Heartbeat is delivered as its
// own Heartbeat call would deliver it (decoded, checked against the
// caller's identity, handed to the Receiver with a reply channel), all of
// them before any answer is awaited, so the node takes them in one loop
// pass; then each answer is awaited as Heartbeat awaits it. A Heartbeat
// refused or left unanswered gets the code its own call would have failed
// with. A default-election Heartbeat is refused (InvalidArgument): it has a
// call of its own.
func (s *PeerService) Heartbeats(ctx context.Context, x *pb.Heartbeats) (*pb.HeartbeatsReply, error) {
	hbs := x.GetHeartbeats()
	out := &pb.HeartbeatsReply{Answers: make([]*pb.HeartbeatAnswer, len(hbs))}
	replies := make([]chan election.Message, len(hbs))
	for i, h := range hbs {
		replies[i], out.Answers[i] = s.deliverHeartbeat(ctx, h, "Heartbeats.heartbeats", i)
	}
	s.awaitHeartbeats(ctx, replies, out.Answers)
	return out, nil
}

// deliverHeartbeat delivers h, the i-th message of a call's field (named
// in a refusal), as its own Heartbeat call would: it returns the channel
// its answer will come on, or its refusal. A default-election Heartbeat is
// refused (InvalidArgument): it has a call of its own.
func (s *PeerService) deliverHeartbeat(ctx context.Context, h *pb.Heartbeat, field string, i int) (chan election.Message, *pb.HeartbeatAnswer) {
	if h.GetElection() == "" {
		s.rejectedInvalid.Add(1)
		return nil, refusal(status.Errorf(codes.InvalidArgument, "%v: %s[%d] is the default election's Heartbeat, which has a call of its own", ErrInvalidMessage, field, i))
	}
	reply := make(chan election.Message, 1)
	if err := s.deliver(ctx, h, reply); err != nil {
		return nil, refusal(err)
	}
	return reply, nil
}

// awaitHeartbeats sets answers[i] to the answer on replies[i] for each
// delivered Heartbeat, waiting MaxHeartbeatWait at most for them all (the
// node takes a call's heartbeats in one loop pass), and never up to the
// caller's deadline: it stops a fifth of the time left short of it, and a
// heartbeat not answered by then is answered DeadlineExceeded. The call
// then reaches its caller in time with what did come: the answers, and in
// a Batch its one-way messages' refusals (sent again if the node was only
// busy); waited for to the deadline, the whole call was lost on the way.
func (s *PeerService) awaitHeartbeats(ctx context.Context, replies []chan election.Message, answers []*pb.HeartbeatAnswer) {
	wait := MaxHeartbeatWait
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		wait = min(wait, left-left/5)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for i, reply := range replies {
		if reply == nil {
			continue
		}
		r, err := s.awaitHeartbeat(ctx, reply)
		if err != nil {
			answers[i] = refusal(err)
			continue
		}
		answers[i] = &pb.HeartbeatAnswer{Reply: r}
	}
}

// refusal is err as a HeartbeatAnswer.
func refusal(err error) *pb.HeartbeatAnswer {
	st := status.Convert(err)
	return &pb.HeartbeatAnswer{Code: uint32(st.Code()), Message: st.Message()}
}

// sendHeartbeats implements heartbeatsLink: ms go in calls under the size
// limit (max-message-bytes) each. A peer that does not know Heartbeats (an
// older node: Unimplemented) is sent one call per Heartbeat for batchRetry.
func (l *grpcLink) sendHeartbeats(ctx context.Context, ms []election.Message) bool {
	if time.Now().UnixNano() < l.noHeartbeatsUntil.Load() {
		return l.sendEach(ctx, ms)
	}
	limit := l.t.cfg.MaxMessageBytes - batchSlack
	x := &pb.Heartbeats{}
	var chunk []election.Message
	size := 0
	for i, m := range ms {
		enc, err := Encode(m)
		if err != nil {
			l.fail(m, err)
			continue
		}
		h, ok := enc.(*pb.Heartbeat)
		if !ok {
			l.fail(m, fmt.Errorf("%w: %T cannot travel in a Heartbeats call", ErrInvalidMessage, enc))
			continue
		}
		n := proto.Size(h) + batchSlack
		if size+n > limit && len(chunk) > 0 {
			if silent, unknown := l.heartbeatsCall(ctx, x, chunk); silent || unknown {
				return l.afterChunk(ctx, ms[i:], silent, unknown)
			}
			x, chunk, size = &pb.Heartbeats{}, nil, 0
		}
		x.Heartbeats = append(x.Heartbeats, h)
		chunk = append(chunk, m)
		size += n
	}
	if len(chunk) == 0 {
		return false
	}
	silent, unknown := l.heartbeatsCall(ctx, x, chunk)
	return l.afterChunk(ctx, nil, silent, unknown)
}

// heartbeatsCall makes one Heartbeats call carrying ms and hands each
// answer to the Receiver. unknown: the peer does not serve Heartbeats; ms
// were then sent one call each (and so are its heartbeats for batchRetry).
func (l *grpcLink) heartbeatsCall(ctx context.Context, x *pb.Heartbeats, ms []election.Message) (silent, unknown bool) {
	var reply *pb.HeartbeatsReply
	delivered, silent := l.rpc(ctx, ms, func(ctx context.Context, c pb.PeerClient, opts ...grpc.CallOption) error {
		var err error
		reply, err = c.Heartbeats(ctx, x, opts...)
		return err
	}, func(err error) bool {
		unknown = status.Code(err) == codes.Unimplemented
		return unknown
	})
	if unknown {
		l.noHeartbeatsUntil.Store(time.Now().Add(batchRetry).UnixNano())
		return l.sendEach(ctx, ms), true
	}
	if !delivered {
		return silent, false
	}
	l.answered(ms, reply.GetAnswers())
	return false, false
}

// answered hands each answer of a call to ms, its heartbeats (answers[i]
// is ms[i]'s), to the Receiver, and fails each heartbeat refused or left
// without an answer; one the peer's node did not answer in time is lost
// on the way (counted, not reported).
func (l *grpcLink) answered(ms []election.Message, answers []*pb.HeartbeatAnswer) {
	for i, m := range ms {
		var a *pb.HeartbeatAnswer
		if i < len(answers) {
			a = answers[i]
		}
		if a != nil && a.GetCode() == 0 && a.GetReply() != nil {
			l.received(a.GetReply())
			continue
		}
		l.t.sent[m.Type].Add(^uint64(0)) // counted as sent by rpc
		switch {
		case a == nil || a.GetCode() == 0:
			l.fail(m, status.Error(codes.Internal, "transport: the call's answer names no reply for this heartbeat"))
		case codes.Code(a.GetCode()) == codes.DeadlineExceeded:
			// Not answered in time: lost on the way, as a call that found
			// no answer in time loses its named messages (see rpc).
			l.t.countFailed(m)
		default:
			l.fail(m, status.Error(codes.Code(a.GetCode()), a.GetMessage()))
		}
	}
}
