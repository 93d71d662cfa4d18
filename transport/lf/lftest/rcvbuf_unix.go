//go:build unix

package lftest

import (
	"context"
	"net"
	"syscall"
	"testing"

	"google.golang.org/grpc"
)

// DialSmallRcvBuf returns a client of addr whose sockets have a 4 KiB
// receive buffer, so a server writing big answers fills it.
func DialSmallRcvBuf(t *testing.T, addr string) *grpc.ClientConn {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	return Dial(t, addr, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
}
