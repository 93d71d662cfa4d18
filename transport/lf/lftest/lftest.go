// Package lftest holds what the tests of the pool (transport/lf) and of
// the comparison servers (tools/peerservers: perconn and hsha) share: client helpers for the
// echo service, leak checks, and the scenarios both controls must pass. It
// is for tests only.
package lftest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/lf/lftest/echo"
)

// WaitFor bounds every wait of these tests.
const WaitFor = 10 * time.Second

// Limits are the engine limits these tests were written for: a 4 MiB
// message (grpc-go's server default), 100 streams a connection and a 16 KiB
// header list. The engine has no defaults of its own.
func Limits() engine.Limits {
	return engine.Limits{MaxRecvMsgBytes: 4 << 20, MaxConcurrentStreams: 100, MaxHeaderListBytes: 16 << 10}
}

// Registry returns a registry that serves svc.
func Registry(svc *echo.Server) *engine.Registry {
	reg := engine.NewRegistry()
	echo.RegisterServer(reg, svc)
	return reg
}

// Dial returns a client of addr; opts are added to the defaults.
func Dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// Call calls the echo service on cc and returns the echo. Four values ask
// for something else:
//
//	"block"  Block: signals Entered, then waits for Release (or its context);
//	"ctx"    Sleep for an hour: signals Entered, then waits for its context;
//	"panic"  Panic: the handler panics;
//	"fail"   Fail: FailedPrecondition.
func Call(ctx context.Context, cc *grpc.ClientConn, v string) (string, error) {
	var err error
	switch v {
	case "ctx":
		err = cc.Invoke(ctx, echo.MethodSleep, durationpb.New(time.Hour), new(emptypb.Empty))
	case "panic":
		err = cc.Invoke(ctx, echo.MethodPanic, new(emptypb.Empty), new(emptypb.Empty))
	case "fail":
		err = cc.Invoke(ctx, echo.MethodFail, wrapperspb.String("FailedPrecondition:asked to fail"), new(emptypb.Empty))
	default:
		method := echo.MethodEcho
		if v == "block" {
			method = echo.MethodBlock
		}
		out := new(wrapperspb.BytesValue)
		err = cc.Invoke(ctx, method, wrapperspb.Bytes([]byte(v)), out)
		return string(out.GetValue()), err
	}
	return "", err
}

// Echoed calls Call and fails unless the answer is v.
func Echoed(ctx context.Context, cc *grpc.ClientConn, v string) error {
	got, err := Call(ctx, cc, v)
	if err == nil && got != v {
		err = fmt.Errorf("echo %.20q, want %.20q", got, v)
	}
	return err
}

// WaitEntered waits for n Sleep or Block handlers of svc to start.
func WaitEntered(t *testing.T, svc *echo.Server, n int) {
	t.Helper()
	timer := time.NewTimer(WaitFor)
	defer timer.Stop()
	for i := range n {
		select {
		case <-svc.Entered:
		case <-timer.C:
			t.Fatalf("only %d of %d handlers entered", i, n)
		}
	}
}

// ReleaseAndWait closes svc.Release, then waits for the released call's
// result on res, which must be nil, and for stopped to close (a stop
// running meanwhile).
func ReleaseAndWait(t *testing.T, ctx context.Context, svc *echo.Server, res <-chan error, stopped <-chan struct{}) {
	t.Helper()
	close(svc.Release)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("in-flight call failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("in-flight call did not finish")
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the stop did not return")
	}
}

// WaitGoroutines polls until at most n goroutines run, failing at the
// deadline with a dump of them.
func WaitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(WaitFor)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines still running, want <= %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitServed waits for Serve's result, which must be nil after a stop.
func WaitServed(t *testing.T, served <-chan error) {
	t.Helper()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v, want nil after stop", err)
		}
	case <-time.After(WaitFor):
		t.Fatal("Serve did not return after stop")
	}
}

// Server is what the scenarios drive.
type Server interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// Start serves a fresh server of svc (from echo.New) on a loopback port.
type Start func(t *testing.T, svc *echo.Server) (srv Server, addr string, served <-chan error)

// held is a server of a Start whose handler holds one Block call.
type held struct {
	svc    *echo.Server
	srv    Server
	cc     *grpc.ClientConn
	served <-chan error
	ctx    context.Context // bounds the test
	res    chan error      // the held call's result
}

// startHeld serves a fresh server of start, calls Block on it and returns
// once the handler holds the call.
func startHeld(t *testing.T, start Start) *held {
	t.Helper()
	h := &held{svc: echo.New(), res: make(chan error, 1)}
	var addr string
	h.srv, addr, h.served = start(t, h.svc)
	h.cc = Dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), WaitFor)
	t.Cleanup(cancel)
	h.ctx = ctx
	go func() { h.res <- Echoed(ctx, h.cc, "block") }()
	WaitEntered(t, h.svc, 1)
	return h
}

// GracefulStopLetsInFlightCallFinish: GracefulStop waits for a blocked
// call, which then succeeds; Serve returns nil; later calls fail.
func GracefulStopLetsInFlightCallFinish(t *testing.T, start Start) {
	before := runtime.NumGoroutine()
	h := startHeld(t, start)
	srv, cc, served, res := h.srv, h.cc, h.served, h.res

	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()

	// GracefulStop must wait for the call: it has not returned while the
	// handler blocks. Give it a chance to (wrongly) finish first.
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned while a call was in flight")
	case err := <-res:
		t.Fatalf("call returned early: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	ReleaseAndWait(t, h.ctx, h.svc, res, stopped)
	WaitServed(t, served)

	// New calls fail once the server is gone.
	cctx, ccancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := Call(cctx, cc, "after")
	ccancel()
	if err == nil {
		t.Error("call after GracefulStop succeeded")
	}
	cc.Close()
	WaitGoroutines(t, before)
}

// StopCancelsBlockedCall: Stop ends a blocked call, Serve returns nil, and
// a later Serve returns errStopped.
func StopCancelsBlockedCall(t *testing.T, start Start, errStopped error) {
	before := runtime.NumGoroutine()
	h := startHeld(t, start)
	srv := h.srv
	srv.Stop()
	WaitServed(t, h.served)
	select {
	case err := <-h.res:
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
			t.Errorf("call during Stop: %v, want Unavailable or Canceled", err)
		}
	case <-h.ctx.Done():
		t.Fatal("client call did not end after Stop")
	}
	h.cc.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(lis); err != errStopped {
		t.Errorf("Serve after Stop = %v, want %v", err, errStopped)
	}
	WaitGoroutines(t, before)
}

// ConcurrentCalls serves 4 connections × 4 callers × 25 echoes (see
// ConcurrentEchoes) on a fresh server of start, calls during with the
// server and the number of connections and calls while they are open,
// then closes them, stops the server gracefully, calls after and checks
// that no goroutine is left.
func ConcurrentCalls(t *testing.T, start Start, during func(srv Server, conns, calls int), after func(srv Server)) {
	before := runtime.NumGoroutine()
	srv, addr, served := start(t, echo.New())
	const conns, perConn, callsEach = 4, 4, 25
	ccs := ConcurrentEchoes(t, addr, conns, perConn, callsEach)
	during(srv, conns, conns*perConn*callsEach)
	for _, cc := range ccs {
		cc.Close()
	}
	srv.GracefulStop()
	WaitServed(t, served)
	after(srv)
	WaitGoroutines(t, before)
}

// LargeEchoes sends 8 concurrent 512 KiB echoes on cc, then checks that a
// panicking handler is an Internal error and the connection lives on.
//
// Its bound is a multiple of WaitFor because it is a bound on work, not on
// an event: 4 MiB each way, over TLS under the race detector, takes up to
// 12 s on a shared 2-core machine (load 17) and completes; the bound only
// has to tell a stall from slowness.
func LargeEchoes(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*WaitFor)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := fmt.Sprint(i, string(bytes.Repeat([]byte{'a' + byte(i)}, 512<<10)))
			got, err := Call(ctx, cc, v)
			if err == nil && got != v {
				err = fmt.Errorf("call %d: echo of %d bytes differs", i, len(got))
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := Call(ctx, cc, "panic"); status.Code(err) != codes.Internal {
		t.Errorf("panicking handler: %v, want Internal", err)
	}
	if got, err := Call(ctx, cc, "still here"); err != nil || got != "still here" {
		t.Errorf("call after a handler panic: %q, %v", got, err)
	}
}

// Serve serves srv on a fresh loopback port and returns the address and the
// channel that gets Serve's result.
func Serve(t *testing.T, srv interface{ Serve(net.Listener) error }) (string, <-chan error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	return lis.Addr().String(), served
}

// ConcurrentEchoes opens conns connections to addr and runs perConn
// goroutines on each, every one making callsEach echo calls of growing
// size and checking the answers. It returns the connections, still open,
// once every call is done.
func ConcurrentEchoes(t *testing.T, addr string, conns, perConn, callsEach int) []*grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitFor)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, conns*perConn)
	var ccs []*grpc.ClientConn
	for i := range conns {
		cc := Dial(t, addr)
		ccs = append(ccs, cc)
		for j := range perConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range callsEach {
					v := fmt.Sprintf("c%d-g%d-%d-%s", i, j, k, bytes.Repeat([]byte("x"), k*100))
					if err := Echoed(ctx, cc, v); err != nil {
						errs <- err
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
	return ccs
}
