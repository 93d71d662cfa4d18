package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
)

// DefaultProbeTimeout bounds the confirming re-dial of a peer whose
// connection was refused or reset (see ErrPeerDown).
const DefaultProbeTimeout = 30 * time.Millisecond

// ErrPeerDown wraps a send failure (or a dropped connection) that is
// evidence the peer's process is gone while its host is up: the RPC failed
// because the connection was refused or reset, and one immediate plain TCP
// dial to the peer's address was refused too. The node treats it, for its
// leader, as the leader's death (election.EventLeaderTimeout). A peer that
// is silent (host down, paused, cut off) never produces it: its dial times
// out instead of being refused.
var ErrPeerDown = errors.New("transport: peer refuses connections (its process is gone)")

// refusedOrReset reports whether err, an RPC's error, says the peer's kernel
// refused the connection or reset (or closed without GOAWAY) an established
// one: gRPC Unavailable caused by a refused dial or a reset read. A deadline,
// a cancellation, a GOAWAY of a graceful shutdown or an overloaded peer is
// not: those say nothing about the peer's process being gone.
func refusedOrReset(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	// grpc-go flattens the cause into the status message.
	msg := st.Message()
	if strings.Contains(msg, "GOAWAY") || strings.Contains(msg, "goaway") {
		return false
	}
	return strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "connection reset by peer") ||
		strings.Contains(msg, "error reading from server: EOF") ||
		strings.Contains(msg, "broken pipe")
}

// probe dials addr once over plain TCP: accepted says something listens
// there, refused that the dial was refused (or reset): nothing listens on a
// live host. A dial that times out or fails otherwise is neither. addr
// must be a host:port; any other gRPC target is never probed.
func probe(addr string, timeout time.Duration) (accepted, refused bool) {
	if timeout <= 0 || strings.Contains(addr, "/") || strings.HasPrefix(addr, "unix:") {
		return false, false
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false, false
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err == nil {
		c.Close()
		return true, false
	}
	return false, errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// probeRefused reports whether one dial to addr was refused (see probe).
func probeRefused(addr string, timeout time.Duration) bool {
	_, refused := probe(addr, timeout)
	return refused
}

// probeAccepted reports whether one dial to addr was accepted (see probe).
func probeAccepted(addr string, timeout time.Duration) bool {
	accepted, _ := probe(addr, timeout)
	return accepted
}

// A dropped connection's peer is probed at once, then every dropProbeGap
// for dropProbeSteady probes, then at gaps doubling from 2·dropProbeGap,
// dropProbes in all (the last 71 ms after the first): a killed process's
// established connections are reset before its listening socket is
// closed, so a probe at once may still connect (the kernel completes the
// handshake on the dying listener's backlog). On this kind of host the
// listener was gone 0.14–0.8 ms after the reset in two kills of three, and
// within 6 ms in all (30 SIGKILLs of a process holding 40 MB, at load 4):
// probes a millisecond apart find it within a millisecond of its close,
// and the doubling gaps still cover a slow exit. A probe is one loopback
// dial. Without the retries the leader's death would be found only by the
// next heartbeat, one heartbeat interval later.
const (
	dropProbes      = 15
	dropProbeSteady = 9
	dropProbeGap    = time.Millisecond
)

// probeDropped probes addr after its connection dropped, on the schedule
// above, until a dial is refused (the process is gone).
func probeDropped(addr string, timeout time.Duration) bool {
	gap := dropProbeGap
	for i := range dropProbes {
		if probeRefused(addr, timeout) {
			return true
		}
		if i >= dropProbeSteady {
			gap *= 2
		}
		if i < dropProbes-1 {
			time.Sleep(gap)
		}
	}
	return false
}

// peerDown returns err wrapped in ErrPeerDown when it is confirmed evidence
// that the peer at addr is gone (see ErrPeerDown), else err unchanged.
func (t *GRPC) peerDown(err error, addr string) error {
	if refusedOrReset(err) && probeRefused(addr, t.cfg.ProbeTimeout) {
		t.peersDown.Add(1)
		return fmt.Errorf("%w: %w", ErrPeerDown, err)
	}
	return err
}

// watch follows conn's connectivity state while it lives. When an
// established connection drops (Ready to any other state: the peer reset
// or closed it) it probes the peer's address at once instead of
// waiting for the next message to fail; a refused probe is reported as a
// failed heartbeat to the peer, wrapped in ErrPeerDown. It ends when conn
// is closed.
func (l *grpcLink) watch(conn *grpc.ClientConn, id election.NodeID, addr string) {
	t := l.t
	s := conn.GetState()
	for {
		if s == connectivity.Shutdown {
			return
		}
		// The connection was up and is not now. Up is seen as a change
		// from Ready, or, when this goroutine ran too late to see Ready (a
		// loaded host: it started, or looked, only after the connection
		// had come up and dropped), as an RPC that succeeded on it since
		// (delivered). Without the second, such a drop would go unreported
		// and only the next heartbeat would find it, an interval later
		// (TestGRPCDroppedConnectionReportsPeerDown).
		// A connection the link let go of (drop, a new address, the
		// peer removed) is closed on purpose: nothing to probe.
		if s != connectivity.Ready && l.delivered.Swap(false) && l.holds(conn) &&
			probeDropped(addr, t.cfg.ProbeTimeout) && t.q.ctx.Err() == nil {
			t.peersDown.Add(1)
			t.cfg.Receiver.Failed(election.Message{Type: election.MsgHeartbeat, From: t.cfg.Self, To: id},
				fmt.Errorf("%w: connection to %s dropped and a re-dial was refused: %w", ErrPeerDown, addr, io.EOF))
		}
		if !conn.WaitForStateChange(context.Background(), s) {
			return
		}
		ns := conn.GetState()
		if s == connectivity.Ready && ns != connectivity.Ready {
			l.delivered.Store(true)
		}
		s = ns
	}
}
