package engine

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/emptypb"
)

// newTestCtx is the context of a call with no metadata or peer.
func newTestCtx(parent context.Context, timeout time.Duration) *callCtx {
	c := &Call{}
	c.ctx.start(c, parent, time.Now(), timeout)
	return &c.ctx
}

func TestCallCtxDeadline(t *testing.T) {
	t.Run("expires without Done", func(t *testing.T) {
		d := newTestCtx(context.Background(), 20*time.Millisecond)
		defer d.release()
		if d.Err() != nil {
			t.Fatal("ended early")
		}
		deadline := time.Now().Add(5 * time.Second)
		for d.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling Err is what is under test
		}
		if !errors.Is(d.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", d.Err())
		}
		select {
		case <-d.Done():
		default:
			t.Fatal("Done not closed after the deadline passed")
		}
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		d := newTestCtx(context.Background(), 20*time.Millisecond)
		defer d.release()
		select {
		case <-d.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close")
		}
		if !errors.Is(d.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", d.Err())
		}
	})
	t.Run("parent cancel", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		d := newTestCtx(parent, time.Hour)
		defer d.release()
		child, ccancel := context.WithTimeout(d, time.Hour) // follows d through AfterFunc
		defer ccancel()
		cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from the call's did not end with the base")
		}
		if !errors.Is(d.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", d.Err())
		}
	})
	t.Run("release", func(t *testing.T) {
		d := newTestCtx(context.Background(), time.Hour)
		done := d.Done()
		ran := make(chan struct{})
		stop := d.AfterFunc(func() { close(ran) })
		stopped := d.AfterFunc(func() { t.Error("stopped AfterFunc ran") })
		if !stopped() {
			t.Fatal("stop of a pending AfterFunc returned false")
		}
		d.release()
		<-done
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc did not run")
		}
		if stop() {
			t.Fatal("stop after the run returned true")
		}
		if dl, ok := d.Deadline(); !ok || time.Until(dl) < 50*time.Minute {
			t.Fatalf("Deadline = %v, %v", dl, ok)
		}
	})
}

func TestCallCtxValues(t *testing.T) {
	if !ctxKeys.ok {
		t.Fatal("the keys of grpc-go's metadata, peer and stream helpers were not learnt; Run falls back to context.WithValue")
	}
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7}
	type own struct{}
	base := context.WithValue(context.Background(), own{}, "base")
	c := &Call{method: "/p.S/M", peer: &peer.Peer{Addr: addr}}
	c.addMetadata(":authority", "x")
	c.addMetadata("k", "1")
	c.addMetadata("k", "2")
	c.ctx.start(c, base, time.Time{}, 0)
	ctx := context.Context(&c.ctx)

	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || !slices.Equal(md["k"], []string{"1", "2"}) || !slices.Equal(md[":authority"], []string{"x"}) || len(md) != 2 {
		t.Fatalf("incoming metadata = %v, %v", md, ok)
	}
	if got := metadata.ValueFromIncomingContext(ctx, "K"); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("ValueFromIncomingContext = %v", got)
	}
	if p, ok := peer.FromContext(ctx); !ok || p.Addr != addr {
		t.Fatalf("peer = %v, %v", p, ok)
	}
	if m, ok := grpc.Method(ctx); !ok || m != "/p.S/M" {
		t.Fatalf("grpc.Method = %q, %v", m, ok)
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs("h", "v")); err != nil || c.header["h"][0] != "v" {
		t.Fatalf("SetHeader: %v, header %v", err, c.header)
	}
	if ctx.Value(own{}) != "base" {
		t.Fatal("a value of the base context is lost")
	}
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a deadline without grpc-timeout")
	}

	// No metadata at all: like grpc-go, an empty map that is there.
	bare := newTestCtx(context.Background(), 0)
	if md, ok := metadata.FromIncomingContext(bare); !ok || len(md) != 0 {
		t.Fatalf("no metadata: %v, %v", md, ok)
	}
	if _, ok := peer.FromContext(bare); ok {
		t.Fatal("a peer where none is known")
	}
}

func TestCallCtxEnds(t *testing.T) {
	t.Run("cause", func(t *testing.T) {
		d := newTestCtx(context.Background(), time.Nanosecond)
		deadline := time.Now().Add(5 * time.Second)
		for d.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !errors.Is(context.Cause(d), context.DeadlineExceeded) {
			t.Fatalf("Cause = %v, want DeadlineExceeded", context.Cause(d))
		}
	})
	t.Run("earlier parent deadline", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d := newTestCtx(parent, time.Hour)
		pdl, _ := parent.Deadline()
		if dl, ok := d.Deadline(); !ok || !dl.Equal(pdl) {
			t.Fatalf("Deadline = %v, %v; want the parent's %v", dl, ok, pdl)
		}
	})
	t.Run("aborted before start", func(t *testing.T) {
		c := &Call{}
		c.abort()
		c.ctx.start(c, context.Background(), time.Time{}, 0)
		select {
		case <-c.ctx.Done():
		default:
			t.Fatal("an aborted call's context is not done")
		}
		if !errors.Is(c.ctx.Err(), context.Canceled) {
			t.Fatalf("Err = %v", c.ctx.Err())
		}
	})
	t.Run("handler returned", func(t *testing.T) {
		var seen context.Context
		c := &Call{entry: methodEntry{h: func(_ any, ctx context.Context, _ func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			seen = ctx
			return &emptypb.Empty{}, nil
		}}}
		c.Run(context.Background())
		if seen == nil || !errors.Is(seen.Err(), context.Canceled) {
			t.Fatalf("after the handler returned, its context's Err = %v", seen.Err())
		}
	})
}
