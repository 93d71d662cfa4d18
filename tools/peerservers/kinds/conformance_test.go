package kinds

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// The conformance tests run every server kind against the stock grpc-go
// client and assert the same observable outcomes. Where the stock server and
// the engine may legitimately differ (the text of errors the server makes up
// itself, such as Unimplemented or ResourceExhausted) they assert the code
// only.

func TestEchoSizes(t *testing.T) {
	sizes := []int{0, 1, 64, 16 << 10, 16<<10 + 1, 64<<10 - 1, 64 << 10, 70 << 10, 100 << 10, 1 << 20}
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		for i, n := range sizes {
			if err := echoCall(callCtx(t), cc, pattern(n, uint32(i))); err != nil {
				t.Errorf("Echo(%d bytes): %v", n, err)
			}
		}
		s.ranHandlers(t, d, int64(len(sizes)), "the Echos")
	})
}

func TestConcurrentCallsOneConn(t *testing.T) {
	const calls = 200
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		mustEcho(t, cc, 1) // connect first so every call shares one connection
		ctx := callCtx(t)
		errs := make(chan error, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				n := 100 + i
				if i%8 == 0 {
					n = 70<<10 + i // some calls need several windows of flow control
				}
				if err := echoCall(ctx, cc, pattern(n, uint32(i))); err != nil {
					errs <- fmt.Errorf("call %d (%d bytes): %w", i, n, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		d.connectedOnce(t)
	})
}

func TestManyConnections(t *testing.T) {
	const conns, callsPerConn = 50, 10
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		ctx := callCtx(t)
		d := new(dialer)
		ccs := make([]*grpc.ClientConn, conns)
		for i := range ccs {
			ccs[i] = dialWith(t, s.addr, d)
		}
		errs := make(chan error, conns*callsPerConn)
		var wg sync.WaitGroup
		for i, cc := range ccs {
			wg.Go(func() {
				for j := range callsPerConn {
					if err := echoCall(ctx, cc, pattern(1+j*100, uint32(i*callsPerConn+j))); err != nil {
						errs <- fmt.Errorf("conn %d call %d: %w", i, j, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := d.dials.Load(); got != conns {
			t.Errorf("clients connected %d times, want %d", got, conns)
		}
	})
}

func TestUnimplemented(t *testing.T) {
	methods := []string{
		"/" + echo.ServiceName + "/NoSuchMethod",
		"/electord.kinds.NoSuchService/Echo",
		"/NoSuchService/",
	}
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		for _, m := range methods {
			err := cc.Invoke(callCtx(t), m, wrapperspb.Bytes([]byte("x")), new(wrapperspb.BytesValue))
			// Code only: the message is the server's own wording.
			if got := status.Code(err); got != codes.Unimplemented {
				t.Errorf("%s: got %v (%v), want Unimplemented", m, got, err)
			}
		}
		mustEcho(t, cc, 10)
		s.ranHandlers(t, d, 1, "the Echo")
	})
}

func TestDeadlineExceeded(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		mustEcho(t, cc, 1)

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err := cc.Invoke(ctx, echo.MethodSleep, durationpb.New(5*time.Second), new(emptypb.Empty))
		if got := status.Code(err); got != codes.DeadlineExceeded {
			t.Fatalf("Sleep(5s) with a 100ms deadline: got %v (%v), want DeadlineExceeded", got, err)
		}
		if el := time.Since(t0); el > 4*time.Second {
			t.Errorf("the call took %v", el)
		}
		// The handler saw its context end (grpc-timeout and/or RST_STREAM)
		// instead of sleeping the full 5 seconds.
		waitFor(t, 3*time.Second, "the server's Sleep handler to return", func() bool {
			return s.echo.Sleeps() == 1 && s.echo.Sleeping() == 0
		})
		if got := s.echo.Canceled(); got != 1 {
			t.Errorf("server saw %d canceled sleeps, want 1", got)
		}
		// The same connection still serves calls.
		mustEcho(t, cc, 100)
		mustEcho(t, cc, 70<<10)
		d.connectedOnce(t)
	})
}

func TestStatusRoundTrip(t *testing.T) {
	cases := []struct {
		code codes.Code
		msg  string
	}{
		{codes.NotFound, "no such thing"},
		{codes.InvalidArgument, ""},
		{codes.Aborted, "colon: inside: the message"},
		{codes.PermissionDenied, "héllo wörld — ünïcødé ✓ 日本語 🙂"},
		{codes.FailedPrecondition, "100% done, %41 is not A, %zz, trailing %"},
		{codes.Unknown, "ctl\tchars\r\nand\x00nul\x7f"},
		{codes.DeadlineExceeded, "the server made this one up"},
		{codes.Unauthenticated, strings.Repeat("long message ", 200)},
		{codes.Code(42), "a code grpc-go does not name"},
	}
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		for _, c := range cases {
			err := cc.Invoke(callCtx(t), echo.MethodFail, wrapperspb.String(fmt.Sprintf("%d:%s", c.code, c.msg)), new(emptypb.Empty))
			st := status.Convert(err)
			if st.Code() != c.code || st.Message() != c.msg {
				t.Errorf("Fail(%v, %q): got code %v message %q", c.code, c.msg, st.Code(), st.Message())
			}
		}
		d.connectedOnce(t)
	})
}

func TestPanic(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{Workers: 2})
		cc, d := dial(t, s.addr)
		// More panics than workers: a worker lost to a panic would show.
		for i := range 5 {
			err := cc.Invoke(callCtx(t), echo.MethodPanic, new(emptypb.Empty), new(emptypb.Empty))
			// Code only: the message is the server's own wording.
			if got := status.Code(err); got != codes.Internal {
				t.Fatalf("Panic #%d: got %v (%v), want Internal", i, got, err)
			}
			mustEcho(t, cc, 10)
		}
		// And the server still serves other connections.
		cc2, _ := dial(t, s.addr)
		mustEcho(t, cc2, 10)
		d.connectedOnce(t)
	})
}

func TestMetadata(t *testing.T) {
	bin := string([]byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, '\n', ':'})
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, _ := dial(t, s.addr)
		ctx := metadata.AppendToOutgoingContext(callCtx(t),
			"x-plain", "hello",
			"x-multi", "one",
			"x-multi", "two",
			"x-spaces", "a value with spaces, commas; and = signs",
			"x-data-bin", bin,
			"x-empty-bin", "",
			"not-echoed", "nope",
		)
		var header, trailer metadata.MD
		err := cc.Invoke(ctx, echo.MethodMetadata, new(emptypb.Empty), new(emptypb.Empty), grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		want := map[string][]string{
			"x-plain":     {"hello"},
			"x-multi":     {"one", "two"},
			"x-spaces":    {"a value with spaces, commas; and = signs"},
			"x-data-bin":  {bin},
			"x-empty-bin": {""},
		}
		// Big values too: 6 KiB each, in header and trailer (under the
		// engine's 16 KiB header list limit).
		big := metadata.Pairs("x-big-1", string(pattern(3<<10, 1)), "x-big-2", string(pattern(3<<10, 2)))
		for k := range big {
			big[k] = []string{fmt.Sprintf("%x", big[k][0])}
		}
		var bigHeader, bigTrailer metadata.MD
		err = cc.Invoke(metadata.NewOutgoingContext(callCtx(t), big), echo.MethodMetadata, new(emptypb.Empty), new(emptypb.Empty),
			grpc.Header(&bigHeader), grpc.Trailer(&bigTrailer))
		if err != nil {
			t.Fatalf("Metadata with 12 KiB of values: %v", err)
		}
		for k, vs := range big {
			if got := bigHeader.Get(k); !equalStrings(got, vs) {
				t.Errorf("header %s: got %d values (%d bytes), want the 6 KiB value", k, len(got), len(strings.Join(got, "")))
			}
			if got := bigTrailer.Get(k); !equalStrings(got, vs) {
				t.Errorf("trailer %s: got %d values (%d bytes), want the 6 KiB value", k, len(got), len(strings.Join(got, "")))
			}
		}

		for name, md := range map[string]metadata.MD{"header": header, "trailer": trailer} {
			for k, vs := range want {
				if got := md.Get(k); !equalStrings(got, vs) {
					t.Errorf("%s %s = %q, want %q", name, k, got, vs)
				}
			}
			if got := md.Get("not-echoed"); len(got) != 0 {
				t.Errorf("%s has not-echoed = %q; only x- keys are echoed", name, got)
			}
		}
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMaxRecvMsgSize(t *testing.T) {
	const limit = 1 << 20
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{MaxRecvMsgBytes: limit})
		cc, d := dial(t, s.addr)
		// A BytesValue of n bytes encodes to n + 1 (tag) + 3 (length) bytes.
		mustEcho(t, cc, limit-4)
		for _, n := range []int{limit - 3, limit, 3 * limit} {
			err := cc.Invoke(callCtx(t), echo.MethodEcho, wrapperspb.Bytes(pattern(n, 1)), new(wrapperspb.BytesValue))
			// Code only: the message is the server's own wording.
			if got := status.Code(err); got != codes.ResourceExhausted {
				t.Errorf("Echo(%d bytes) over a %d-byte limit: got %v (%v), want ResourceExhausted", n, limit, got, err)
			}
			mustEcho(t, cc, 1000) // the connection is still usable
		}
		s.ranHandlers(t, d, 4, "the Echos within the limit")
	})
}

func TestGracefulStop(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, _ := dial(t, s.addr)
		mustEcho(t, cc, 1)

		inflight := s.sleeping(t, callCtx(t), cc, 300*time.Millisecond)

		stopped := make(chan struct{})
		go func() { s.srv.GracefulStop(); close(stopped) }()

		select {
		case err := <-inflight:
			if err != nil {
				t.Errorf("in-flight call during GracefulStop: %v, want success", err)
			}
		case <-time.After(eventually):
			t.Fatal("in-flight call did not finish")
		}
		select {
		case <-stopped:
		case <-time.After(eventually):
			t.Fatal("GracefulStop did not return")
		}
		s.served(t, "GracefulStop")

		// New calls fail, on the old client and on a new one.
		err := cc.Invoke(callCtx(t), echo.MethodEcho, wrapperspb.Bytes([]byte("late")), new(wrapperspb.BytesValue))
		if got := status.Code(err); got != codes.Unavailable {
			t.Errorf("call after GracefulStop on the old client: got %v (%v), want Unavailable", got, err)
		}
		cc2, _ := dial(t, s.addr)
		err = cc2.Invoke(callCtx(t), echo.MethodEcho, wrapperspb.Bytes([]byte("late")), new(wrapperspb.BytesValue))
		if got := status.Code(err); got != codes.Unavailable {
			t.Errorf("call after GracefulStop on a new client: got %v (%v), want Unavailable", got, err)
		}
	})
}

func TestStopEndsCalls(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, _ := dial(t, s.addr)
		mustEcho(t, cc, 1)
		inflight := s.sleeping(t, callCtx(t), cc, time.Minute)
		s.stop(t)
		select {
		case err := <-inflight:
			if got := status.Code(err); got != codes.Unavailable {
				t.Errorf("in-flight call during Stop: got %v (%v), want Unavailable", got, err)
			}
		case <-time.After(eventually):
			t.Fatal("in-flight call did not end after Stop")
		}
		s.served(t, "Stop")
	})
}

// TestClientCancel cancels a call whose handler is running: the client sees
// Canceled at once, and (as with grpc-go's server, which cancels the
// handler's context on RST_STREAM) the handler's context ends too.
// inlineKinds run a call's handler on the goroutine that holds its
// connection (the Leader/Followers pool and goroutine-per-connection): they
// read nothing from that connection while the handler runs, so a client's
// RST_STREAM reaches the server only after the handler returned. The call
// still ends at once for the client; the handler ends at its deadline (or
// when done) and its late answer is dropped. docs/LF.md says so.
var inlineKinds = map[string]bool{"lf": true, "perconn": true}

func TestClientCancel(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		s := start(t, kind, Options{})
		cc, d := dial(t, s.addr)
		mustEcho(t, cc, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sleep := 30 * time.Second
		if inlineKinds[kind] {
			sleep = time.Second
		}
		res := s.sleeping(t, ctx, cc, sleep)
		cancel()
		select {
		case err := <-res:
			if got := status.Code(err); got != codes.Canceled {
				t.Errorf("canceled call: got %v (%v), want Canceled", got, err)
			}
		case <-time.After(eventually):
			t.Fatal("canceled call did not return")
		}
		if inlineKinds[kind] {
			waitFor(t, 3*time.Second, "the inline Sleep handler to run to its end", func() bool {
				return s.echo.Sleeping() == 0
			})
			if got := s.echo.Canceled(); got != 0 {
				t.Errorf("inline kind: %d handlers saw a cancellation; a reset cannot reach a running inline handler", got)
			}
		} else {
			waitFor(t, 3*time.Second, "the server's Sleep handler to see the cancellation (RST_STREAM)", func() bool {
				return s.echo.Sleeping() == 0 && s.echo.Canceled() == 1
			})
		}
		mustEcho(t, cc, 100)
		d.connectedOnce(t)
	})
}
