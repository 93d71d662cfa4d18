package transport

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// onConn returns a stream context as grpc-go gives the tap one for a
// stream of the connection from port.
func onConn(port int) (context.Context, context.CancelFunc) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}})
	return context.WithCancel(ctx)
}

// The budget allows peer-max-buffered-bytes / the stream window streams in
// flight (32 with the defaults, at least one), a quarter of them on one
// connection (at least one), refuses one more with ResourceExhausted naming
// the key and counts it, and gives a slot back when its stream's context
// ends.
func TestStreamBudget(t *testing.T) {
	for _, c := range []struct {
		bytes         int64
		msg           int
		want, perConn int64
	}{{32 << 20, 1 << 20, 32, 8}, {3<<20 + 1, 1 << 20, 3, 1}, {1000, 1 << 20, 1, 1}, {1 << 20, 1000, 16, 4}} {
		b := NewPeerService(1, nil).newStreamBudget(c.bytes, c.msg, time.Minute)
		if b.max != c.want || b.perConn != c.perConn {
			t.Errorf("%d bytes, %d-byte messages: %d streams, %d a connection, want %d and %d", c.bytes, c.msg, b.max, b.perConn, c.want, c.perConn)
		}
	}

	svc := NewPeerService(1, nil)
	b := svc.newStreamBudget(8<<20, 1<<20, time.Minute) // 8 streams, 2 a connection
	var cancels []context.CancelFunc
	open := func(port int) error {
		ctx, cancel := onConn(port)
		cancels = append(cancels, cancel)
		_, err := b.tap(ctx, nil)
		return err
	}
	for port := 1; port <= 4; port++ {
		for range 2 {
			if err := open(port); err != nil {
				t.Fatalf("connection %d: %v", port, err)
			}
		}
	}
	err := open(5)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "peer-max-buffered-bytes") {
		t.Fatalf("ninth stream: %v, want ResourceExhausted naming peer-max-buffered-bytes", err)
	}
	if st := svc.Stats(); st.RejectedBudget != 1 || st.StreamsInFlight != 8 {
		t.Fatalf("stats %+v", st)
	}
	cancels[8]() // the refused stream's end gives nothing back
	cancels[0]() // connection 1's first
	eventually(t, "a slot given back", func() bool { return svc.Stats().StreamsInFlight == 7 })
	// Connection 2 holds its share: the free slot is not for it.
	err = open(2)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "share") {
		t.Fatalf("a third stream on one connection: %v, want ResourceExhausted naming the share", err)
	}
	if err := open(1); err != nil {
		t.Fatalf("a freed slot, on the connection that freed it: %v", err)
	}
	if err := open(6); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("beyond the budget again: %v", err)
	}
	for _, c := range cancels {
		c()
	}
	eventually(t, "every slot given back", func() bool { return svc.Stats().StreamsInFlight == 0 })
	if st := svc.Stats(); st.RejectedBudget != 3 {
		t.Fatalf("stats %+v", st)
	}
	b.mu.Lock()
	left := len(b.conns)
	b.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d connections still counted with no stream in flight", left)
	}
}

// A stream holds its slot for at most the budget's deadline: the tap's
// context carries it, and a real grpc-go server ends a call whose request
// never comes (HEADERS only, no grpc-timeout) with DeadlineExceeded at
// that deadline, giving the slot back. The default peer-stream-timeout is above the
// longest legitimate wait of a handler (config's TestMaxHeartbeatWaitIsTheTransports).
func TestStreamBudgetDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	svc := NewPeerService(2, newFakeReceiver(2))
	b := svc.newStreamBudget(1<<20, 1<<20, deadline) // one stream
	ctx, cancel := onConn(1)
	defer cancel()
	got, err := b.tap(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := got.Deadline(); !ok || time.Until(d) > deadline {
		t.Fatalf("the stream's context has deadline %v (set %v), want within %v", d, ok, deadline)
	}
	cancel()
	eventually(t, "the slot given back", func() bool { return svc.Stats().StreamsInFlight == 0 })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewGRPCServer(svc, maxMsg, grpc.InTapHandle(b.tap))
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// A stream that sends its headers and nothing else: no deadline of
	// its own.
	st, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true}, "/electord.v1.Peer/Answer")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the headers-only stream let in", func() bool { return svc.Stats().StreamsInFlight == 1 })
	start := time.Now()
	end := make(chan error, 1)
	go func() { end <- st.RecvMsg(new(struct{})) }()
	select {
	case err := <-end:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("the headers-only stream ended with %v, want DeadlineExceeded", err)
		}
		t.Logf("ended after %v", time.Since(start))
	case <-time.After(deadline + waitFor):
		t.Fatalf("the headers-only stream still open %v after the deadline", waitFor)
	}
	eventually(t, "the slot given back", func() bool { return svc.Stats().StreamsInFlight == 0 })
}
