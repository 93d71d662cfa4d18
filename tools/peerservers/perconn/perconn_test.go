package perconn

import (
	"runtime"
	"testing"

	"github.com/electord/electord/transport/lf/lftest"
	"github.com/electord/electord/transport/lf/lftest/echo"
)

// start serves a fresh Server on a loopback port.
func start(t *testing.T, ctl *echo.Server) (*Server, string, <-chan error) {
	t.Helper()
	srv := New(lftest.Registry(ctl), lftest.Limits())
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
		if st.Calls != uint64(calls) {
			t.Errorf("Stats().Calls = %d, want %d", st.Calls, calls)
		}
		if st.Accepted < uint64(conns) {
			t.Errorf("Stats().Accepted = %d, want >= %d", st.Accepted, conns)
		}
	}, func(srv lftest.Server) {
		if st := srv.(*Server).Stats(); st.Open != 0 || st.Panics != 0 {
			t.Errorf("after stop: Open = %d, Panics = %d; want 0, 0", st.Open, st.Panics)
		}
	})
}

func TestGracefulStopLetsInFlightCallFinish(t *testing.T) {
	lftest.GracefulStopLetsInFlightCallFinish(t, startCtl)
}

func TestStopCancelsBlockedCall(t *testing.T) {
	lftest.StopCancelsBlockedCall(t, startCtl, ErrServerStopped)
}

// TestLargeMessagesSmallClientBuffer sends big echoes to a client with a
// tiny receive buffer, so the server's writes outrun the socket.
func TestLargeMessagesSmallClientBuffer(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, addr, served := start(t, echo.New())
	cc := lftest.DialSmallRcvBuf(t, addr)
	lftest.LargeEchoes(t, cc)
	t.Logf("Stats() after large echoes: %+v", srv.Stats())
	cc.Close()
	srv.GracefulStop()
	lftest.WaitServed(t, served)
	lftest.WaitGoroutines(t, before)
}
