package transport

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// streamBudget bounds the inbound streams a grpc-go peer server has in
// flight across all its connections (see PeerService.BufferBudget).
type streamBudget struct {
	max int64
	svc *PeerService // counts the streams in flight, and the refusals
	err error
}

// BufferBudget returns the grpc.ServerOption that bounds what a grpc-go
// server of this service buffers for all its connections together to about
// maxBufferedBytes: grpc-go may buffer a whole stream window on every open
// stream (staticWindow of maxMessageBytes, which NewGRPCServer sets), so it
// allows at most maxBufferedBytes / that window streams in flight at once,
// at least one. A stream beyond them is refused when its headers arrive,
// before anything of it is buffered, with ResourceExhausted naming
// peer-max-buffered-bytes (grpc-go answers with trailers only and resets
// the stream), counted in ServerStats.RejectedBudget and logged as the
// service's other refusals are (SetLogger). A slot is free again as soon
// as its stream ends (answered, reset, timed out or its connection gone).
// The option is grpc.InTapHandle, of which a server takes one.
//
// Without it, the bound was max-conns x peer-max-streams windows (1024 x
// 16 x 1 MiB, 16 GiB) plus the messages being assembled.
func (s *PeerService) BufferBudget(maxBufferedBytes int64, maxMessageBytes int) grpc.ServerOption {
	return grpc.InTapHandle(s.newStreamBudget(maxBufferedBytes, maxMessageBytes).tap)
}

func (s *PeerService) newStreamBudget(maxBufferedBytes int64, maxMessageBytes int) *streamBudget {
	win := int64(staticWindow(maxMessageBytes))
	b := &streamBudget{max: max(1, maxBufferedBytes/win), svc: s}
	b.err = status.Errorf(codes.ResourceExhausted,
		"transport: the peer server has %d streams in flight, all that peer-max-buffered-bytes (%d bytes, %d a stream) allows; try again",
		b.max, maxBufferedBytes, win)
	return b
}

// tap takes a slot for a new stream, or refuses the stream when none is
// free. grpc-go calls it with the stream's context, which ends when the
// stream does, on every path after a stream was let in; the slot is given
// back then.
func (b *streamBudget) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	open := &b.svc.budgetInFlight
	if open.Add(1) > b.max {
		open.Add(-1)
		b.svc.rejectedBudget.Add(1)
		b.svc.logRefusal("no room in peer-max-buffered-bytes", b.err)
		return ctx, b.err
	}
	context.AfterFunc(ctx, func() { open.Add(-1) })
	return ctx, nil
}
