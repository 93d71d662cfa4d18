package engine

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/emptypb"
)

// newTestCtx is the context of a call with no metadata or peer.
func newTestCtx(parent context.Context, timeout time.Duration) *callCtx {
	c := &Call{}
	c.ctx = newCallCtx(c)
	c.ctx.start(parent, time.Now(), timeout)
	return c.ctx
}

func TestCallCtxDeadline(t *testing.T) {
	t.Run("expires without Done", func(t *testing.T) {
		d := newTestCtx(context.Background(), 20*time.Millisecond)
		defer d.end()
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
		defer d.end()
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
		defer d.end()
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
		d.end()
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
	c.ctx = newCallCtx(c)
	c.ctx.addMetadata(":authority", "x")
	c.ctx.addMetadata("k", "1")
	c.ctx.addMetadata("k", "2")
	c.ctx.addMetadata("l", "3") // beyond the inline room
	c.ctx.start(base, time.Time{}, 0)
	ctx := context.Context(c.ctx)

	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || !slices.Equal(md["k"], []string{"1", "2"}) || !slices.Equal(md[":authority"], []string{"x"}) || len(md) != 3 || md["l"][0] != "3" {
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
		c.ctx = newCallCtx(c)
		c.abort()
		c.ctx.start(context.Background(), time.Time{}, 0)
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
		c.ctx = newCallCtx(c)
		c.Run(context.Background())
		if seen == nil || !errors.Is(seen.Err(), context.Canceled) {
			t.Fatalf("after the handler returned, its context's Err = %v", seen.Err())
		}
	})
}

// TestKeptContext: a handler may keep its context past the call (grpc-go
// allows it), while the Session reuses the stream and Call for the next
// calls. The kept context must still answer for its own call.
func TestKeptContext(t *testing.T) {
	var kept []context.Context
	desc := grpc.ServiceDesc{ServiceName: "keep.K", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{
		MethodName: "Keep",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			kept = append(kept, ctx)
			return &emptypb.Empty{}, nil
		},
	}}}
	reg := NewRegistry()
	reg.RegisterService(&desc, nil)
	s := NewSession(reg, configured(Limits{}), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	in := clientStart()
	const n = 40
	for i := range n {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: "/keep.K/Keep"}, {Name: ":authority", Value: "x"}, {Name: "content-type", Value: "application/grpc"},
			{Name: "x-call", Value: strconv.Itoa(i)}, {Name: "grpc-timeout", Value: strconv.Itoa(i+1) + "H"}} {
			_ = enc.WriteField(f)
		}
		var b bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		_ = fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
		in = append(in, b.Bytes()...)
		// One call per Feed, so that each reuses the stream of the last.
		if err := s.Feed(in); err != nil {
			t.Fatal(err)
		}
		in = nil
		if got := s.Serve(context.Background()); got != 1 {
			t.Fatalf("call %d: ran %d calls", i, got)
		}
		if s.Open() != 0 {
			t.Fatalf("call %d: %d streams open", i, s.Open())
		}
		s.Wrote(len(s.Output()))
	}
	if len(kept) != n {
		t.Fatalf("kept %d contexts", len(kept))
	}
	for i, ctx := range kept {
		if v := metadata.ValueFromIncomingContext(ctx, "x-call"); len(v) != 1 || v[0] != strconv.Itoa(i) {
			t.Fatalf("context of call %d: x-call %v", i, v)
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < time.Duration(i)*time.Hour {
			t.Fatalf("context of call %d: deadline %v, %v", i, dl, ok)
		}
		if p, ok := peer.FromContext(ctx); !ok || p.Addr.String() != "127.0.0.1:9" {
			t.Fatalf("context of call %d: peer %v", i, p)
		}
		if m, _ := grpc.Method(ctx); m != "/keep.K/Keep" {
			t.Fatalf("context of call %d: method %q", i, m)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("context of call %d: Err %v after the call", i, ctx.Err())
		}
		if err := grpc.SetHeader(ctx, metadata.Pairs("late", "1")); err == nil {
			t.Fatalf("context of call %d: SetHeader after the call succeeded", i)
		}
	}
}

// TestCallCtxDerived: contexts derived from a call's context end when it
// does, by the time the call's end (or abort) returns, as children of
// context.WithCancel do; and a derived context that is cancelled early is
// forgotten at once.
func TestCallCtxDerived(t *testing.T) {
	for _, how := range []string{"end", "abort"} {
		t.Run(how, func(t *testing.T) {
			c := &Call{}
			c.ctx = newCallCtx(c)
			c.ctx.start(context.Background(), time.Time{}, 0)
			child, cancel := context.WithCancel(c.ctx)
			defer cancel()
			grandchild, cancel2 := context.WithTimeout(child, time.Hour)
			defer cancel2()
			if how == "end" {
				c.ctx.end()
			} else {
				c.abort()
			}
			if child.Err() == nil || grandchild.Err() == nil {
				t.Fatalf("after %s: child %v, grandchild %v", how, child.Err(), grandchild.Err())
			}
		})
	}
	t.Run("cancelled children are forgotten", func(t *testing.T) {
		c := &Call{}
		c.ctx = newCallCtx(c)
		c.ctx.start(context.Background(), time.Time{}, 0)
		for range 1000 {
			_, cancel := context.WithTimeout(c.ctx, time.Hour)
			cancel()
		}
		c.ctx.mu.Lock()
		n := len(c.ctx.afters)
		c.ctx.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d derived contexts still registered after they were cancelled", n)
		}
		c.ctx.end()
	})
}
