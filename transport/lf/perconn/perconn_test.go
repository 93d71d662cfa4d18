package perconn

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/lf/internal/ctltest"
)

// start serves a fresh Server on a loopback port.
func start(t *testing.T, ctl *ctltest.Ctl) (*Server, string, <-chan error) {
	t.Helper()
	reg := engine.NewRegistry()
	reg.RegisterService(&ctltest.Desc, ctl)
	srv := New(reg, engine.Limits{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	return srv, lis.Addr().String(), served
}

// startCtl is start as the shared scenarios want it.
func startCtl(t *testing.T, ctl *ctltest.Ctl) (ctltest.Server, string, <-chan error) {
	return start(t, ctl)
}

func TestConcurrentCallsFromSeveralConns(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, addr, served := start(t, ctltest.New())
	const conns, perConn, callsEach = 4, 4, 25
	ctx, cancel := context.WithTimeout(context.Background(), ctltest.WaitFor)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, conns*perConn)
	var ccs []*grpc.ClientConn
	for i := range conns {
		cc := ctltest.Dial(t, addr)
		ccs = append(ccs, cc)
		for j := range perConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range callsEach {
					v := fmt.Sprintf("c%d-g%d-%d-%s", i, j, k, bytes.Repeat([]byte("x"), k*100))
					got, err := ctltest.Call(ctx, cc, v)
					if err != nil {
						errs <- err
						return
					}
					if got != v {
						errs <- fmt.Errorf("echo %.20q, want %.20q", got, v)
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
	st := srv.Stats()
	if st.Calls != conns*perConn*callsEach {
		t.Errorf("Stats().Calls = %d, want %d", st.Calls, conns*perConn*callsEach)
	}
	if st.Accepted < conns {
		t.Errorf("Stats().Accepted = %d, want >= %d", st.Accepted, conns)
	}
	for _, cc := range ccs {
		cc.Close()
	}
	srv.GracefulStop()
	ctltest.WaitServed(t, served)
	if st := srv.Stats(); st.Open != 0 || st.Panics != 0 {
		t.Errorf("after stop: Open = %d, Panics = %d; want 0, 0", st.Open, st.Panics)
	}
	ctltest.WaitGoroutines(t, before)
}

func TestGracefulStopLetsInFlightCallFinish(t *testing.T) {
	ctltest.GracefulStopLetsInFlightCallFinish(t, startCtl)
}

func TestStopCancelsBlockedCall(t *testing.T) {
	ctltest.StopCancelsBlockedCall(t, startCtl, ErrServerStopped)
}

// TestLargeMessagesSmallClientBuffer sends big echoes to a client with a
// tiny receive buffer, so the server's writes outrun the socket.
func TestLargeMessagesSmallClientBuffer(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, addr, served := start(t, ctltest.New())
	cc := ctltest.DialSmallRcvBuf(t, addr)
	ctltest.LargeEchoes(t, cc)
	t.Logf("Stats() after large echoes: %+v", srv.Stats())
	cc.Close()
	srv.GracefulStop()
	ctltest.WaitServed(t, served)
	ctltest.WaitGoroutines(t, before)
}
