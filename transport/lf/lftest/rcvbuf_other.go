//go:build !unix

package lftest

import (
	"testing"

	"google.golang.org/grpc"
)

// DialSmallRcvBuf is Dial where SO_RCVBUF is not at hand.
func DialSmallRcvBuf(t *testing.T, addr string) *grpc.ClientConn { return Dial(t, addr) }
