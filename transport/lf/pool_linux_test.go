//go:build linux

package lf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/lf/lftest"
	"github.com/electord/electord/transport/lf/lftest/echo"
)

// ---- helpers ----

type testServer struct {
	*Server
	addr    string
	served  chan error
	svc     *echo.Server
	stopped bool
}

func start(t *testing.T, cfg Config, hook func(s *Server)) *testServer {
	t.Helper()
	return startVariant(t, cfg, variant{}, hook)
}

// startVariant is start for a comparison variant of the pool (only the
// default one without the lfvariant tag).
func startVariant(t *testing.T, cfg Config, v variant, hook func(s *Server)) *testServer {
	t.Helper()
	sv := echo.New()
	s, err := newServer(lftest.Registry(sv), nodeConfig(cfg), v)
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		hook(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), served: make(chan error, 1), svc: sv}
	go func() { ts.served <- s.Serve(ln) }()
	t.Cleanup(func() {
		if !ts.stopped {
			ts.stop(t, false)
		}
	})
	eventually(t, 10*time.Second, "pool goroutines up", func() bool { return s.Stats().Live == s.cfg.Workers })
	return ts
}

// stop stops the server (gracefully or not) within a deadline and checks
// that Serve returned nil and every pool goroutine is gone.
func (ts *testServer) stop(t *testing.T, hard bool) {
	t.Helper()
	ts.awaitStop(t, hard, ts.beginStop(hard))
}

// beginStop starts stopping the server (gracefully or not) on a goroutine
// of its own; the channel closes when Stop or GracefulStop returned.
func (ts *testServer) beginStop(hard bool) <-chan struct{} {
	ts.stopped = true
	done := make(chan struct{})
	go func() {
		if hard {
			ts.Stop()
		} else {
			ts.GracefulStop()
		}
		close(done)
	}()
	return done
}

// awaitStop is the rest of stop once beginStop returned done.
func (ts *testServer) awaitStop(t *testing.T, hard bool, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("stop (hard=%v) did not return; stats %+v\n%s", hard, ts.Stats(), buf[:runtime.Stack(buf, true)])
	}
	select {
	case err := <-ts.served:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	if st := ts.Stats(); st.Live != 0 || st.Polling != 0 || st.Standby != 0 || st.Handling != 0 || st.Conns != 0 {
		t.Errorf("after stop: %+v", st)
	}
}

// tlsClients holds the client credentials of the TLS test servers, by
// address (tls_linux_test.go); dial uses them, or insecure credentials.
var tlsClients sync.Map

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if c, ok := tlsClients.Load(addr); ok {
		creds = c.(credentials.TransportCredentials)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func call(ctx context.Context, cc *grpc.ClientConn, p []byte) ([]byte, error) {
	got, err := lftest.Call(ctx, cc, string(p))
	return []byte(got), err
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// load runs clients×perClient goroutines, each making calls echo calls on
// its own client's connection, and fails on any error or wrong answer.
func load(t *testing.T, addr string, clients, perClient, calls int, sizes []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	for c := 0; c < clients; c++ {
		cc := dial(t, addr)
		for g := 0; g < perClient; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < calls; i++ {
					size := sizes[(c+g+i)%len(sizes)]
					p := bytes.Repeat([]byte{byte('a' + (c+g+i)%26)}, size)
					copy(p, fmt.Sprintf("%d/%d/%d", c, g, i))
					got, err := call(ctx, cc, p)
					if err != nil {
						errs <- fmt.Errorf("client %d goroutine %d call %d: %w", c, g, i, err)
						return
					}
					if !bytes.Equal(got, p) {
						errs <- fmt.Errorf("client %d goroutine %d call %d: wrong echo (%d bytes, want %d)", c, g, i, len(got), len(p))
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// ---- tests ----

func TestEcho(t *testing.T) {
	ts := start(t, Config{Workers: 3}, nil)
	cc := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := call(ctx, cc, []byte("hello"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("call: %q, %v", got, err)
	}
	_, err = call(ctx, cc, []byte("fail"))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("fail call: %v", err)
	}
	if err := cc.Invoke(ctx, "/"+echo.ServiceName+"/Nope", &wrapperspb.BytesValue{}, new(wrapperspb.BytesValue)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
	st := ts.Stats()
	if st.Accepts != 1 || st.Conns != 1 || st.Calls != 2 || st.HandlerErrors != 1 {
		t.Errorf("stats %+v", st)
	}
	ts.stop(t, false)
}

// TestSinglePollerAndOwner drives many connections and concurrent calls
// (small messages, and large ones that need several reads and EPOLLOUT)
// and checks the two invariants of the pattern: never more than one
// goroutine in epoll_wait, never more than one owner of a connection.
// TestVariantsSinglePollerAndOwner (-tags lfvariant) runs it on the
// comparison variants.
func TestSinglePollerAndOwner(t *testing.T) {
	t.Run("LIFO", func(t *testing.T) { checkSinglePollerAndOwner(t, Config{Workers: 6}, variant{}) })
}

func checkSinglePollerAndOwner(t *testing.T, cfg Config, v variant) {
	ts := startVariant(t, cfg, v, nil)
	load(t, ts.addr, 12, 4, 30, []int{1, 100, 3000, 70 << 10})
	st := ts.Stats()
	checkInvariants(t, ts)
	if st.Calls != 12*4*30 || st.Promotions == 0 || st.Events == 0 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("stats %+v", st)
	ts.stop(t, false)
}

// noProbe says why a check or a test did not run.
const noProbe = "the pool's probe is compiled in only with -race or -tags lfprobe"

// checkInvariants checks, where the probe is compiled in, the two
// invariants of the pattern: never more than one goroutine in epoll_wait,
// never more than one owner of a connection.
func checkInvariants(t *testing.T, ts *testServer) {
	t.Helper()
	inEpoll, inUse, ok := probeMax(ts.Server)
	if !ok {
		t.Log(noProbe)
		return
	}
	if inEpoll != 1 {
		t.Errorf("max goroutines in epoll_wait = %d, want 1", inEpoll)
	}
	if inUse != 1 {
		t.Errorf("max owners of one connection = %d, want 1", inUse)
	}
}

// TestNoLostWakeups: K clients × M calls must all complete before a
// deadline, with a pool smaller than the number of clients.
func TestNoLostWakeups(t *testing.T) {
	ts := start(t, Config{Workers: 3}, nil)
	const K, M = 40, 40
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var okCalls atomic.Int64
	for k := 0; k < K; k++ {
		cc := dial(t, ts.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := 0; m < M; m++ {
				if _, err := call(ctx, cc, []byte("x")); err != nil {
					t.Errorf("client %d call %d: %v", k, m, err)
					return
				}
				okCalls.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := okCalls.Load(); n != K*M {
		t.Fatalf("%d of %d calls completed", n, K*M)
	}
	checkInvariants(t, ts)
	ts.stop(t, false)
}

// TestSaturationRecovers: with 2 workers both stuck in handlers there is
// no poller and no goroutine on standby; once released, the queued call and new calls
// are served.
func TestSaturationRecovers(t *testing.T) {
	ts := start(t, Config{Workers: 2}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ccs := []*grpc.ClientConn{dial(t, ts.addr), dial(t, ts.addr), dial(t, ts.addr)}
	for _, cc := range ccs { // connect everything first
		if _, err := call(ctx, cc, []byte("warm")); err != nil {
			t.Fatal(err)
		}
	}
	before := ts.Stats().NoStandby

	results := make(chan error, 3)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := call(ctx, ccs[i], []byte("block"))
			results <- err
		}()
	}
	lftest.WaitEntered(t, ts.svc, 2)
	st := ts.Stats()
	if st.NoStandby <= before {
		t.Errorf("NoStandby did not rise: %d -> %d", before, st.NoStandby)
	}
	if st.Handling != 2 || st.Polling != 0 || st.Standby != 0 {
		t.Errorf("saturated pool: %+v", st)
	}
	go func() {
		_, err := call(ctx, ccs[2], []byte("queued"))
		results <- err
	}()
	close(ts.svc.Release)
	for i := 0; i < 3; i++ {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("call: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("calls did not complete after release")
		}
	}
	load(t, ts.addr, 4, 2, 10, []int{10})
	ts.stop(t, false)
}

// TestGracefulStopWakesEveryStandby: after GracefulStop every pool
// goroutine has exited and the process is back to its goroutine count.
func TestGracefulStopWakesEveryStandby(t *testing.T) {
	baseline := runtime.NumGoroutine()
	const N = 8
	ts := start(t, Config{Workers: N}, nil)
	var ccs []*grpc.ClientConn
	for i := 0; i < 4; i++ {
		cc, err := grpc.NewClient("passthrough:///"+ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ccs = append(ccs, cc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := call(ctx, cc, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	eventually(t, 10*time.Second, "N-1 goroutines on standby and a poller", func() bool {
		st := ts.Stats()
		return st.Live == N && st.Standby == N-1 && st.Polling == 1
	})
	ts.stop(t, false) // checks Live == Standby == 0
	for _, cc := range ccs {
		cc.Close()
	}
	eventually(t, 10*time.Second, fmt.Sprintf("goroutines back to %d", baseline), func() bool {
		return runtime.NumGoroutine() <= baseline
	})
}

// TestGracefulStopDrains: a call in flight when GracefulStop starts
// completes; new connections are refused.
func TestGracefulStopDrains(t *testing.T) {
	ts := start(t, Config{Workers: 3}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := dial(t, ts.addr)
	idle := dial(t, ts.addr)
	if _, err := call(ctx, idle, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- lftest.Echoed(ctx, cc, "block") }()
	lftest.WaitEntered(t, ts.svc, 1)
	// beginStop runs GracefulStop on a goroutine of its own; the checks
	// that may fail the test (awaitStop) stay on the test's goroutine, as
	// t.Fatal must.
	stopped := ts.beginStop(false)
	eventually(t, 10*time.Second, "listener closed", func() bool { return ts.listenerClosed.Load() })
	if c, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		c.Close()
		t.Error("dial succeeded after GracefulStop closed the listener")
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}
	lftest.ReleaseAndWait(t, ctx, ts.svc, res, stopped)
	ts.awaitStop(t, false, stopped)
}

// TestStopCancelsCalls: Stop cancels the handlers' context and closes
// everything at once.
func TestStopCancelsCalls(t *testing.T) {
	ts := start(t, Config{Workers: 3}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan error, 2)
	for i := 0; i < 2; i++ {
		cc := dial(t, ts.addr)
		go func() { _, err := call(ctx, cc, []byte("ctx")); res <- err }()
	}
	lftest.WaitEntered(t, ts.svc, 2)
	ts.stop(t, true)
	for i := 0; i < 2; i++ {
		select {
		case err := <-res:
			if status.Code(err) != codes.Unavailable {
				t.Errorf("call in flight across Stop: %v, want Unavailable", err)
			}
		case <-ctx.Done():
			t.Fatal("client call did not end after Stop")
		}
	}
	if n := ts.svc.Canceled(); n != 2 {
		t.Errorf("%d handlers saw their context cancelled, want 2", n)
	}
}

// TestNoFDLeaks counts /proc/self/fd around many connect/disconnect cycles
// (gRPC clients, bare TCP connects, garbage) and after shutdown.
func TestNoFDLeaks(t *testing.T) {
	// Warm the runtime's own netpoller up so that its descriptors are in
	// the baseline.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	before := countFDs(t)
	ts := start(t, Config{Workers: 4}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 30; i++ {
		cc, err := grpc.NewClient("passthrough:///"+ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := call(ctx, cc, []byte("x")); err != nil {
			t.Fatal(err)
		}
		cc.Close()
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			c.Write([]byte("this is not an HTTP/2 client preface at all\r\n\r\n"))
		}
		c.Close()
	}
	eventually(t, 20*time.Second, "all conns accepted and closed", func() bool {
		st := ts.Stats()
		return st.Accepts == 60 && st.Conns == 0
	})
	if st := ts.Stats(); st.Accepts != 60 || st.ConnErrors == 0 {
		t.Errorf("stats %+v", st)
	}
	// The server holds its listener, epoll fd, eventfd and timerfd: +4.
	// The test's own client sockets close in grpc-go's background
	// goroutines, so wait for them (a CI run once counted 14 against 10+3
	// at once).
	eventually(t, 10*time.Second, "at most 4 fds more than before while serving with no conns", func() bool {
		return countFDs(t) <= before+4
	})
	ts.stop(t, false)
	eventually(t, 10*time.Second, "fds back to baseline", func() bool { return countFDs(t) <= before })
}

// TestHandlerPanicKeepsPool: handler panics become Internal errors and
// cost the pool nothing: it still serves N calls at once.
func TestHandlerPanicKeepsPool(t *testing.T) {
	const N = 4
	ts := start(t, Config{Workers: N}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ccs []*grpc.ClientConn
	for i := 0; i < N; i++ {
		ccs = append(ccs, dial(t, ts.addr))
	}
	for i := 0; i < 20; i++ {
		_, err := call(ctx, ccs[i%N], []byte("panic"))
		if status.Code(err) != codes.Internal {
			t.Fatalf("panicking call: %v", err)
		}
	}
	if st := ts.Stats(); st.HandlerPanics != 20 || st.Live != N {
		t.Fatalf("stats %+v", st)
	}
	assertNWay(t, ctx, ts, ccs)
	ts.stop(t, false)
}

// assertNWay checks that len(ccs) handlers can run at once.
func assertNWay(t *testing.T, ctx context.Context, ts *testServer, ccs []*grpc.ClientConn) {
	t.Helper()
	res := make(chan error, len(ccs))
	for _, cc := range ccs {
		go func() { _, err := call(ctx, cc, []byte("block")); res <- err }()
	}
	lftest.WaitEntered(t, ts.svc, len(ccs))
	close(ts.svc.Release)
	for range ccs {
		if err := <-res; err != nil {
			t.Errorf("block call: %v", err)
		}
	}
}

// TestHandlingPanicClosesConn: a panic in the pool's own handling (not
// in a handler) closes that connection only; the goroutine rejoins.
func TestHandlingPanicClosesConn(t *testing.T) {
	const N = 3
	ts := start(t, Config{Workers: N}, func(s *Server) {
		setFeedHook(t, s, func(p []byte) {
			if bytes.Contains(p, []byte("boom!")) {
				panic("lftest: handling panic")
			}
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim := dial(t, ts.addr)
	if _, err := call(ctx, victim, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := call(ctx, victim, []byte("boom!")); status.Code(err) != codes.Unavailable {
		t.Errorf("call on the panicking conn: %v, want Unavailable", err)
	}
	eventually(t, 10*time.Second, "victim conn closed", func() bool { return ts.Stats().Conns == 0 })
	if st := ts.Stats(); st.Panics != 1 || st.Live != N {
		t.Fatalf("stats %+v", st)
	}
	var ccs []*grpc.ClientConn
	for i := 0; i < N; i++ {
		ccs = append(ccs, dial(t, ts.addr))
	}
	assertNWay(t, ctx, ts, ccs)
	ts.stop(t, false)
}

func TestUnixListener(t *testing.T) {
	reg := engine.NewRegistry()
	reg.RegisterService(&echo.Desc, echo.New())
	s, err := New(reg, nodeConfig(Config{Workers: 2}))
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/lf.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := call(ctx, cc, []byte("over unix")); err != nil || string(got) != "over unix" {
		t.Fatalf("call: %q %v", got, err)
	}
	cc.Close()
	s.GracefulStop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left behind: %v", err)
	}
}

func TestServeAfterStop(t *testing.T) {
	s, err := New(engine.NewRegistry(), nodeConfig(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.GracefulStop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); !errors.Is(err, ErrServerStopped) {
		t.Fatalf("Serve after Stop: %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("listener still open")
	}
}

func TestDefaultVariant(t *testing.T) {
	if v := (variant{}); v.fifo() || v.lockOSThread() || v.blockingWait() || v.eventsPerWait() != 1 {
		t.Fatalf("default variant %+v; want LIFO, unlocked, parked, one event per wait", v)
	}
}

// Server satisfies the interface callers share with *grpc.Server.
var _ interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
} = (*Server)(nil)

// TestAcceptBackoff: when accept fails for lack of descriptors the poller
// does not spin on the still-readable listener; it pauses accepting, and
// accepts the waiting connection once descriptors are back.
func TestAcceptBackoff(t *testing.T) {
	var failing atomic.Bool
	var attempts atomic.Int64
	failing.Store(true)
	ts := start(t, Config{Workers: 2}, func(s *Server) {
		setAccept4(t, s, func(fd, flags int) (int, unix.Sockaddr, error) {
			attempts.Add(1)
			if failing.Load() {
				return -1, nil, unix.EMFILE
			}
			return unix.Accept4(fd, flags)
		})
	})
	cc := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() { _, err := call(ctx, cc, []byte("x")); res <- err }()
	eventually(t, 10*time.Second, "accept to pause", func() bool { return ts.Stats().AcceptPauses >= 3 })
	// With 5, 10, 20, 40 ms … pauses, the attempts stay few; a spinning
	// poller would make hundreds of thousands in the same time.
	if n := attempts.Load(); n > 50 {
		t.Fatalf("%d accept attempts for %d pauses: the poller spins", n, ts.Stats().AcceptPauses)
	}
	failing.Store(false)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("call after the pause: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting connection was never accepted")
	}
	if st := ts.Stats(); st.Accepts == 0 {
		t.Fatalf("stats %+v: no accept", st)
	}
	ts.stop(t, false)
}

// TestStaleEventAfterFDReuse: an event that names a descriptor number with
// an older registration generation (the connection it was for is closed,
// and the number now belongs to another) is dropped as stale and never
// touches the connection that holds the number now.
func TestStaleEventAfterFDReuse(t *testing.T) {
	var reads atomic.Int64
	ts := start(t, Config{Workers: 2}, func(s *Server) { setFeedHook(t, s, func([]byte) { reads.Add(1) }) })
	connHandle := func() *handle {
		ts.handlesMu.RLock()
		defer ts.handlesMu.RUnlock()
		for _, h := range ts.handles {
			if h.kind == kindConn {
				return h
			}
		}
		return nil
	}
	a, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "first connection registered", func() bool { return connHandle() != nil })
	oldFD, oldGen := connHandle().fd, connHandle().gen
	a.Close()
	eventually(t, 10*time.Second, "first connection closed", func() bool { return ts.Stats().Conns == 0 })

	// The second connection stays silent, so the pool sees no event of
	// its own for it: any change below comes from the stale event.
	b, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Registered, and no worker holds it any more (its registration and
	// the server's first frames are done): what the stale event finds is
	// an armed connection nobody owns.
	eventually(t, 10*time.Second, "second connection registered and idle", func() bool {
		h := connHandle()
		return h != nil && owners(h) == 0 && h.state.Load() == stArmed
	})
	h := connHandle()
	if h.gen == oldGen {
		t.Fatalf("second connection has the first one's generation %d", oldGen)
	}
	t.Logf("first connection fd %d gen %d; second fd %d gen %d", oldFD, oldGen, h.fd, h.gen)

	readsBefore := reads.Load()
	stale := ts.Stats().Stale
	w := &worker{buf: make([]byte, readChunk)}
	ts.dispatch(unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(h.fd), Pad: int32(oldGen)}, w)
	if got := ts.Stats().Stale; got != stale+1 {
		t.Fatalf("stale events %d -> %d, want one more", stale, got)
	}
	if n := owners(h); n != 0 || h.state.Load() != stArmed || reads.Load() != readsBefore {
		t.Fatalf("the stale event took the live connection (%d owners, state %d)", n, h.state.Load())
	}

	// The live connection still works: it answers a client's SETTINGS.
	b.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(b, b)
	if _, err := b.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the live connection after a stale event: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && sf.IsAck() {
			break
		}
	}
	if reads.Load() == readsBefore {
		t.Fatal("the server never read the live connection")
	}
}
