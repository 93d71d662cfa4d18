//go:build linux

package hsha

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/lf/lftest"
	"github.com/electord/electord/transport/lf/lftest/echo"
)

// start serves a fresh Server on a loopback port.
func start(t *testing.T, ctl *echo.Server) (*Server, string, <-chan error) {
	t.Helper()
	return startWith(t, ctl, Config{})
}

func startWith(t *testing.T, ctl *echo.Server, cfg Config, opts ...func(*Server)) (*Server, string, <-chan error) {
	t.Helper()
	if cfg.Limits == (engine.Limits{}) {
		cfg.Limits = lftest.Limits()
	}
	srv := New(lftest.Registry(ctl), cfg)
	for _, o := range opts {
		o(srv)
	}
	addr, served := lftest.Serve(t, srv)
	return srv, addr, served
}

// startCtl is start as the shared scenarios want it.
func startCtl(t *testing.T, ctl *echo.Server) (lftest.Server, string, <-chan error) {
	return start(t, ctl)
}

func TestConcurrentCallsFromSeveralConns(t *testing.T) {
	lftest.ConcurrentCalls(t, startCtl, func(srv lftest.Server, conns, calls int) {
		st := srv.(*Server).Stats()
		if st.Finished != uint64(calls) || st.Enqueued != st.Finished || st.Rejected != 0 {
			t.Errorf("Stats(): Finished = %d, Enqueued = %d, Rejected = %d; want %d, %d, 0",
				st.Finished, st.Enqueued, st.Rejected, calls, calls)
		}
		if st.Events == 0 || st.MaxDepth < 1 {
			t.Errorf("Stats(): Events = %d, MaxDepth = %d; want both > 0", st.Events, st.MaxDepth)
		}
		if st.Accepted < uint64(conns) {
			t.Errorf("Stats().Accepted = %d, want >= %d", st.Accepted, conns)
		}
	}, func(srv lftest.Server) {
		if st := srv.(*Server).Stats(); st.Open != 0 || st.Panics != 0 || st.QueueDepth != 0 {
			t.Errorf("after stop: Open = %d, Panics = %d, QueueDepth = %d; want 0, 0, 0", st.Open, st.Panics, st.QueueDepth)
		}
	})
}

func TestGracefulStopLetsInFlightCallFinish(t *testing.T) {
	lftest.GracefulStopLetsInFlightCallFinish(t, startCtl)
}

func TestStopCancelsBlockedCall(t *testing.T) {
	lftest.StopCancelsBlockedCall(t, startCtl, ErrServerStopped)
}

// waitUntil polls cond until it holds, failing at the deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(lftest.WaitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestQueueFullRejectsAndRecovers(t *testing.T) {
	before := runtime.NumGoroutine()
	ctl := echo.New()
	srv, addr, served := startWith(t, ctl, Config{Workers: 1, QueueCap: 1})
	ccA, ccB := lftest.Dial(t, addr), lftest.Dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), lftest.WaitFor)
	defer cancel()

	// The one worker blocks in the handler ...
	blocked := make(chan error, 1)
	go func() { _, err := lftest.Call(ctx, ccA, "block"); blocked <- err }()
	select {
	case <-ctl.Entered:
	case <-ctx.Done():
		t.Fatal("handler never entered")
	}
	// ... the one queue slot fills (from another connection) ...
	queued := make(chan error, 1)
	go func() {
		got, err := lftest.Call(ctx, ccB, "queued")
		if err == nil && got != "queued" {
			err = fmt.Errorf("echo %q, want %q", got, "queued")
		}
		queued <- err
	}()
	waitUntil(t, "a call in the queue", func() bool { return srv.Stats().QueueDepth == 1 })

	// ... so further calls meet the reject policy, on either connection.
	for i, cc := range []*grpc.ClientConn{ccA, ccB, ccA} {
		_, err := lftest.Call(ctx, cc, "extra")
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("extra call %d: %v, want ResourceExhausted", i, err)
		}
		if msg := status.Convert(err).Message(); msg != RejectMessage {
			t.Errorf("extra call %d: message %q, want %q", i, msg, RejectMessage)
		}
	}
	st := srv.Stats()
	if st.Rejected != 3 || st.MaxDepth != 1 || st.Enqueued != 2 {
		t.Errorf("Stats(): Rejected = %d, MaxDepth = %d, Enqueued = %d; want 3, 1, 2", st.Rejected, st.MaxDepth, st.Enqueued)
	}

	// Release the worker: both held calls complete, and the server serves
	// again.
	close(ctl.Release)
	for name, ch := range map[string]chan error{"blocked": blocked, "queued": queued} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s call: %v", name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s call did not finish", name)
		}
	}
	for i, cc := range []*grpc.ClientConn{ccA, ccB} {
		v := fmt.Sprint("after-", i)
		if got, err := lftest.Call(ctx, cc, v); err != nil || got != v {
			t.Errorf("call after release: %q, %v; want %q, nil", got, err, v)
		}
	}
	if st := srv.Stats(); st.Rejected != 3 || st.Finished != 4 {
		t.Errorf("after release: Rejected = %d, Finished = %d; want 3, 4", st.Rejected, st.Finished)
	}
	ccA.Close()
	ccB.Close()
	srv.GracefulStop()
	lftest.WaitServed(t, served)
	lftest.WaitGoroutines(t, before)
}

func TestDefaultsAndUnixListener(t *testing.T) {
	srv := New(engine.NewRegistry(), Config{})
	if srv.workers != 2*runtime.GOMAXPROCS(0) || cap(srv.queue) != DefaultQueueCap {
		t.Errorf("defaults: workers %d, queue cap %d; want %d, %d", srv.workers, cap(srv.queue), 2*runtime.GOMAXPROCS(0), DefaultQueueCap)
	}

	before := runtime.NumGoroutine()
	reg := engine.NewRegistry()
	reg.RegisterService(&echo.Desc, echo.New())
	srv = New(reg, Config{Workers: 2, QueueCap: 8, Limits: lftest.Limits()})
	lis, err := net.Listen("unix", t.TempDir()+"/hsha.sock")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	cc, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lftest.WaitFor)
	defer cancel()
	if got, err := lftest.Call(ctx, cc, "over unix"); err != nil || got != "over unix" {
		t.Errorf("call over unix socket: %q, %v", got, err)
	}
	cc.Close()
	srv.Stop()
	lftest.WaitServed(t, served)
	lftest.WaitGoroutines(t, before)
}

// TestLargeMessagesSmallClientBuffer sends big echoes to a client with a
// tiny receive buffer, from a server with a tiny send buffer, so the
// workers' writes outrun the socket and the reactor finishes them on
// EPOLLOUT.
func TestLargeMessagesSmallClientBuffer(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, addr, served := startWith(t, echo.New(), Config{}, func(s *Server) { s.sndBuf = 4096 })
	cc := lftest.DialSmallRcvBuf(t, addr)
	lftest.LargeEchoes(t, cc)
	st := srv.Stats()
	t.Logf("Stats() after large echoes: %+v", st)
	if st.WriteWaits == 0 {
		t.Error("Stats().WriteWaits = 0: the EPOLLOUT path never ran")
	}
	cc.Close()
	srv.GracefulStop()
	lftest.WaitServed(t, served)
	lftest.WaitGoroutines(t, before)
}
