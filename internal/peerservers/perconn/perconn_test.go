package perconn

import (
	"runtime"
	"testing"

	"github.com/electord/electord/internal/peerservers/ctltest"
	"github.com/electord/electord/internal/peerservers/echo"
)

// start serves a fresh Server on a loopback port.
func start(t *testing.T, ctl *echo.Server) (*Server, string, <-chan error) {
	t.Helper()
	srv := New(ctltest.Registry(ctl), ctltest.Limits())
	addr, served := ctltest.Serve(t, srv)
	return srv, addr, served
}

// startCtl is start as the shared scenarios want it.
func startCtl(t *testing.T, ctl *echo.Server) (ctltest.Server, string, <-chan error) {
	return start(t, ctl)
}

func TestConcurrentCallsFromSeveralConns(t *testing.T) {
	ctltest.ConcurrentCalls(t, startCtl, func(srv ctltest.Server, conns, calls int) {
		st := srv.(*Server).Stats()
		if st.Calls != uint64(calls) {
			t.Errorf("Stats().Calls = %d, want %d", st.Calls, calls)
		}
		if st.Accepted < uint64(conns) {
			t.Errorf("Stats().Accepted = %d, want >= %d", st.Accepted, conns)
		}
	}, func(srv ctltest.Server) {
		if st := srv.(*Server).Stats(); st.Open != 0 || st.Panics != 0 {
			t.Errorf("after stop: Open = %d, Panics = %d; want 0, 0", st.Open, st.Panics)
		}
	})
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
	srv, addr, served := start(t, echo.New())
	cc := ctltest.DialSmallRcvBuf(t, addr)
	ctltest.LargeEchoes(t, cc)
	t.Logf("Stats() after large echoes: %+v", srv.Stats())
	cc.Close()
	srv.GracefulStop()
	ctltest.WaitServed(t, served)
	ctltest.WaitGoroutines(t, before)
}
