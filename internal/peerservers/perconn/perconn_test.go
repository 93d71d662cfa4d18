package perconn

import (
	"runtime"
	"testing"

	"github.com/electord/electord/internal/peerservers/ctltest"
	"github.com/electord/electord/internal/peerservers/echo"
	"github.com/electord/electord/transport/lf/engine"
)

// start serves a fresh Server on a loopback port.
func start(t *testing.T, ctl *echo.Server) (*Server, string, <-chan error) {
	t.Helper()
	reg := engine.NewRegistry()
	reg.RegisterService(&echo.Desc, ctl)
	srv := New(reg, engine.Limits{})
	addr, served := ctltest.Serve(t, srv)
	return srv, addr, served
}

// startCtl is start as the shared scenarios want it.
func startCtl(t *testing.T, ctl *echo.Server) (ctltest.Server, string, <-chan error) {
	return start(t, ctl)
}

func TestConcurrentCallsFromSeveralConns(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, addr, served := start(t, echo.New())
	const conns, perConn, callsEach = 4, 4, 25
	ccs := ctltest.ConcurrentEchoes(t, addr, conns, perConn, callsEach)
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
	srv, addr, served := start(t, echo.New())
	cc := ctltest.DialSmallRcvBuf(t, addr)
	ctltest.LargeEchoes(t, cc)
	t.Logf("Stats() after large echoes: %+v", srv.Stats())
	cc.Close()
	srv.GracefulStop()
	ctltest.WaitServed(t, served)
	ctltest.WaitGoroutines(t, before)
}
