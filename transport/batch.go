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

// Batches: the one-way messages of named elections queued for one peer go
// in one call (pb.Batch), in their order. A node that takes over a hundred
// elections at once sends each peer a hundred Coordinators and a hundred
// Candidacies; one unary call each, one after the other on the peer's
// queue, was most of the time until the last election had a new leader.

// batchRetry is how long a peer that answered a Batch with Unimplemented
// (an older node) is sent one call per message before a Batch is tried
// again: an upgrade restarts it at the same address, unseen by its link.
const batchRetry = 30 * time.Second

// batchSlack is what a Batch call adds to its messages' sizes, at most
// (the envelopes' tags and lengths are counted with the messages).
const batchSlack = 64

// batchable says whether m may travel in a Batch: a message of a named
// election (its Heartbeat answered in the BatchAck), or a Candidacy. The
// default election's messages stay one call each, as every node of every
// version reads them.
func batchable(m election.Message) bool {
	return m.Election != "" || m.Type == election.MsgCandidacy
}

// batchLink is a link that can carry several messages in one call.
type batchLink interface {
	// sendBatch carries ms (all batchable, for the same peer) and reports
	// each failure to the Receiver, as send does for one; it hands each
	// Heartbeat's answer to the Receiver, as sendHeartbeats does. It
	// returns true when a call reached its own deadline while ctx was
	// still live; the messages it had not sent yet are then failed with
	// ErrPeerSilent.
	sendBatch(ctx context.Context, ms []election.Message) (silent bool)
	// batchesHeartbeats says whether the peer takes Heartbeats in a Batch
	// now: a peer found not to is sent them in Heartbeats calls for
	// batchRetry.
	batchesHeartbeats() bool
}

// batchesHeartbeats implements batchLink.
func (l *grpcLink) batchesHeartbeats() bool {
	now := time.Now().UnixNano()
	return now >= l.noBatchUntil.Load() && now >= l.noBatchedHeartbeatsUntil.Load()
}

// envelope wraps x, an encoded batchable message, for a Batch.
func envelope(x proto.Message) (*pb.Envelope, error) {
	e := &pb.Envelope{}
	switch x := x.(type) {
	case *pb.Election:
		e.Message = &pb.Envelope_Election{Election: x}
	case *pb.Answer:
		e.Message = &pb.Envelope_Answer{Answer: x}
	case *pb.Coordinator:
		e.Message = &pb.Envelope_Coordinator{Coordinator: x}
	case *pb.CoordinatorAck:
		e.Message = &pb.Envelope_CoordinatorAck{CoordinatorAck: x}
	case *pb.HeartbeatReply:
		e.Message = &pb.Envelope_Notify{Notify: x}
	case *pb.TimeoutNow:
		e.Message = &pb.Envelope_TimeoutNow{TimeoutNow: x}
	case *pb.Candidacy:
		e.Message = &pb.Envelope_Candidacy{Candidacy: x}
	case *pb.Heartbeat:
		e.Message = &pb.Envelope_Heartbeat{Heartbeat: x}
	default:
		return nil, fmt.Errorf("%w: %T cannot travel in a Batch", ErrInvalidMessage, x)
	}
	return e, nil
}

// unwrap is the message e carries; nil for an empty envelope.
func unwrap(e *pb.Envelope) proto.Message {
	switch x := e.GetMessage().(type) {
	case *pb.Envelope_Election:
		return x.Election
	case *pb.Envelope_Answer:
		return x.Answer
	case *pb.Envelope_Coordinator:
		return x.Coordinator
	case *pb.Envelope_CoordinatorAck:
		return x.CoordinatorAck
	case *pb.Envelope_Notify:
		return x.Notify
	case *pb.Envelope_TimeoutNow:
		return x.TimeoutNow
	case *pb.Envelope_Candidacy:
		return x.Candidacy
	}
	return nil
}

// Batch implements pb.PeerServer: each message is delivered as its own
// RPC would deliver it (decoded, checked against the caller's identity,
// handed to the Receiver), in order; the one-way messages refused are
// named in the answer with the code their own RPC would have failed with.
// Then each Heartbeat's answer is awaited, as Heartbeats awaits them: the
// node takes what the call delivered in one loop pass.
func (s *PeerService) Batch(ctx context.Context, x *pb.Batch) (*pb.BatchAck, error) {
	ack := &pb.BatchAck{}
	var replies []chan election.Message
	for i, e := range x.GetMessages() {
		if h, ok := e.GetMessage().(*pb.Envelope_Heartbeat); ok {
			reply, answer := s.deliverHeartbeat(ctx, h.Heartbeat, "Batch.messages", i)
			replies, ack.Heartbeats = append(replies, reply), append(ack.Heartbeats, answer)
			continue
		}
		var err error
		if inner := unwrap(e); inner == nil {
			s.rejectedInvalid.Add(1)
			err = status.Errorf(codes.InvalidArgument, "%v: Batch.messages[%d] is empty", ErrInvalidMessage, i)
		} else {
			err = s.deliver(ctx, inner, nil)
		}
		if err != nil {
			st := status.Convert(err)
			ack.Refused = append(ack.Refused, &pb.Refusal{Index: uint32(i), Code: uint32(st.Code()), Message: st.Message()})
		}
	}
	s.awaitHeartbeats(ctx, replies, ack.Heartbeats)
	return ack, nil
}

// sendBatch implements batchLink: ms go in calls of at most the size limit
// (max-message-bytes) each. A peer that does not know Batch (an older
// node: Unimplemented) is sent one call per message for batchRetry.
func (l *grpcLink) sendBatch(ctx context.Context, ms []election.Message) bool {
	if time.Now().UnixNano() < l.noBatchUntil.Load() {
		return l.sendEach(ctx, ms)
	}
	limit := l.t.cfg.MaxMessageBytes - batchSlack
	b := &pb.Batch{}
	var chunk []election.Message
	size := 0
	flush := func() (silent, unknown bool) {
		if len(chunk) == 0 {
			return false, false
		}
		x, sent := b, chunk
		b, chunk, size = &pb.Batch{}, nil, 0
		return l.sendChunk(ctx, x, sent)
	}
	for i, m := range ms {
		x, err := Encode(m)
		var e *pb.Envelope
		if err == nil {
			e, err = envelope(x)
		}
		if err != nil {
			l.fail(m, err)
			continue
		}
		if n := proto.Size(e) + batchSlack; size+n > limit && len(chunk) > 0 {
			if silent, unknown := flush(); silent || unknown {
				return l.afterChunk(ctx, ms[i:], silent, unknown)
			}
		}
		b.Messages = append(b.Messages, e)
		chunk = append(chunk, m)
		size += proto.Size(e) + batchSlack
	}
	silent, unknown := flush()
	return l.afterChunk(ctx, nil, silent, unknown)
}

// afterChunk handles what a chunk's call left: after a silent call, rest
// is failed with ErrPeerSilent (as the send queue fails what waits behind
// a silent message); after Unimplemented, the peer gets rest (and the
// chunk, which sendChunk gave back) one call each.
func (l *grpcLink) afterChunk(ctx context.Context, rest []election.Message, silent, unknown bool) bool {
	if silent {
		for _, m := range rest {
			if forNamedSet(m) {
				l.t.countFailed(m) // lost on the way (see rpc)
				continue
			}
			l.fail(m, fmt.Errorf("%w (peer %d)", ErrPeerSilent, l.id))
		}
		return true
	}
	if unknown {
		return l.sendEach(ctx, rest)
	}
	return false
}

// sendChunk makes one Batch call. unknown: the peer does not serve Batch;
// the chunk's messages were then sent one call each (and the batches to
// this peer for batchRetry will be too).
func (l *grpcLink) sendChunk(ctx context.Context, b *pb.Batch, ms []election.Message) (silent, unknown bool) {
	var ack *pb.BatchAck
	unknown = false
	delivered, silent := l.rpc(ctx, ms, func(ctx context.Context, c pb.PeerClient, opts ...grpc.CallOption) error {
		var err error
		ack, err = c.Batch(ctx, b, opts...)
		return err
	}, func(err error) bool {
		unknown = status.Code(err) == codes.Unimplemented
		return unknown
	})
	if unknown {
		l.noBatchUntil.Store(time.Now().Add(batchRetry).UnixNano())
		return l.sendEach(ctx, ms), true
	}
	if !delivered {
		return silent, false
	}
	var busy, hbs []election.Message
	for _, m := range ms {
		if isHeartbeat(m) {
			hbs = append(hbs, m)
		}
	}
	// A peer that answers no Heartbeat predates them in a Batch: it
	// refused each as an empty envelope.
	older := len(hbs) > 0 && len(ack.GetHeartbeats()) == 0
	for _, r := range ack.GetRefused() {
		if i := int(r.GetIndex()); i < len(ms) {
			m := ms[i]
			if isHeartbeat(m) {
				continue // answered in ack.Heartbeats, or sent again below
			}
			l.t.sent[m.Type].Add(^uint64(0)) // counted as sent by rpc
			err := status.Error(codes.Code(r.GetCode()), r.GetMessage())
			if retriesBusy(m) && PeerOverloaded(err) {
				busy = append(busy, m) // sent again after a pause (sendQueues.busy)
				continue
			}
			l.fail(m, err)
		}
	}
	l.t.q.busy(l.id, busy)
	if older {
		l.noBatchedHeartbeatsUntil.Store(time.Now().Add(batchRetry).UnixNano())
		for _, m := range hbs {
			l.t.sent[m.Type].Add(^uint64(0)) // counted as sent by rpc, and sent now
		}
		return l.sendHeartbeats(ctx, hbs), false
	}
	l.answered(hbs, ack.GetHeartbeats())
	return false, false
}

// sendEach sends ms one call each, stopping at a silent one (the rest are
// failed with ErrPeerSilent).
func (l *grpcLink) sendEach(ctx context.Context, ms []election.Message) bool {
	for i, m := range ms {
		if l.send(ctx, m) {
			return l.afterChunk(ctx, ms[i+1:], true, false)
		}
	}
	return false
}
