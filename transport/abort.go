package transport

import (
	"context"
	"net"
	"sync"
)

// tcpConns records the TCP connections dialed for one grpc.ClientConn, so
// that dropping it can abort them (see abort).
type tcpConns struct {
	mu    sync.Mutex
	conns []*net.TCPConn
}

// dialer dials TCP as grpc-go's default dialer does, and records each
// connection.
func (r *tcpConns) dialer(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		r.mu.Lock()
		r.conns = append(r.conns, tc)
		r.mu.Unlock()
	}
	return c, nil
}

// abort makes the recorded connections' close a reset that discards what
// their kernels still hold unsent or unacknowledged. A connection is
// dropped because an RPC on it went unanswered: its peer was cut off, and
// what was written meanwhile (heartbeats, announcements) waits in the send
// queue for the next retransmission. Closed gracefully, the kernel would
// still deliver it after the heal, seconds old: a leader cut off for three
// seconds received its followers' stale heartbeats at the heal, counted
// them as fresh support, and kept leading over the leader the others had
// elected meanwhile. Reset, nothing written before the drop arrives late.
func (r *tcpConns) abort() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.SetLinger(0)
	}
	r.conns = nil
}
