package transport

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// connShareDivisor: one connection may hold at most 1/connShareDivisor of
// a BufferBudget's streams, at least one.
const connShareDivisor = 4

// streamBudget bounds the inbound streams a grpc-go peer server has in
// flight across all its connections, and on each (see
// PeerService.BufferBudget).
type streamBudget struct {
	max      int64         // streams in flight, all connections together
	perConn  int64         // streams in flight on one connection
	deadline time.Duration // the peer-stream-timeout key; 0: none
	svc      *PeerService  // counts the streams in flight, and the refusals
	err      error         // the refusal when max are in flight
	connErr  error         // the refusal when a connection holds perConn

	mu    sync.Mutex
	conns map[string]int64 // streams in flight by connection (peer address)
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
// So that no client can hold slots it does not use, a stream holds its
// slot for at most streamDeadline (its context gets that deadline, which
// grpc-go's reads of the request honour: its request must arrive whole, and
// its handler answer, within it, or the stream ends with DeadlineExceeded),
// and one connection may hold at most a quarter of the slots (at least
// one): a stream beyond its connection's share is refused the same way,
// naming the share. A client that opens streams and sends only their
// HEADERS thus takes at most a quarter of the budget per connection, each
// stream for at most streamDeadline; it takes the whole budget only with
// four connections or more that keep opening streams (see
// docs/SECURITY.md).
//
// streamDeadline is the peer-stream-timeout key; it must be above
// MaxHeartbeatWait, or heartbeats being answered end with
// DeadlineExceeded. 0 means none: a stream holds its slot until it ends.
//
// Without it, the bound was max-conns x peer-max-streams windows (1024 x
// 16 x 1 MiB, 16 GiB) plus the messages being assembled.
func (s *PeerService) BufferBudget(maxBufferedBytes int64, maxMessageBytes int, streamDeadline time.Duration) grpc.ServerOption {
	return grpc.InTapHandle(s.newStreamBudget(maxBufferedBytes, maxMessageBytes, streamDeadline).tap)
}

func (s *PeerService) newStreamBudget(maxBufferedBytes int64, maxMessageBytes int, deadline time.Duration) *streamBudget {
	win := int64(staticWindow(maxMessageBytes))
	n := max(1, maxBufferedBytes/win)
	b := &streamBudget{max: n, perConn: max(1, n/connShareDivisor), deadline: deadline, svc: s, conns: map[string]int64{}}
	b.err = status.Errorf(codes.ResourceExhausted,
		"transport: the peer server has %d streams in flight, all that peer-max-buffered-bytes (%d bytes, %d a stream) allows; try again",
		b.max, maxBufferedBytes, win)
	b.connErr = status.Errorf(codes.ResourceExhausted,
		"transport: this connection has %d streams in flight, its share (1/%d) of what peer-max-buffered-bytes (%d streams) allows; try again",
		b.perConn, connShareDivisor, b.max)
	return b
}

// connKey names the connection a stream came on: its peer's address, which
// is the same for every stream of a connection and, for TCP, differs
// between connections open at once.
func connKey(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.Network() + " " + p.Addr.String()
	}
	return ""
}

// tap takes a slot for a new stream, or refuses the stream when none is
// free or its connection holds its share. grpc-go calls it with the
// stream's context, which ends when the stream does, on every path after a
// stream was let in; the slot is given back then. The stream goes on with
// a context that ends the budget's deadline later at the latest (none: 0).
func (b *streamBudget) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	conn := connKey(ctx)
	open := &b.svc.budgetInFlight
	var err error
	b.mu.Lock()
	switch {
	case b.conns[conn] >= b.perConn:
		err = b.connErr
	case open.Load() >= b.max:
		err = b.err
	default:
		open.Add(1)
		b.conns[conn]++
	}
	b.mu.Unlock()
	if err != nil {
		b.svc.rejectedBudget.Add(1)
		b.svc.logRefusal("no room in peer-max-buffered-bytes", err)
		return ctx, err
	}
	var limited context.Context
	var cancel context.CancelFunc
	if b.deadline > 0 {
		limited, cancel = context.WithTimeout(ctx, b.deadline)
	} else {
		limited, cancel = context.WithCancel(ctx)
	}
	context.AfterFunc(ctx, func() {
		cancel()
		b.mu.Lock()
		if b.conns[conn]--; b.conns[conn] <= 0 {
			delete(b.conns, conn)
		}
		open.Add(-1)
		b.mu.Unlock()
	})
	return limited, nil
}
