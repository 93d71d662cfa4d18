//go:build linux && !race && !lfprobe

package lf

import (
	"testing"

	"golang.org/x/sys/unix"
)

func probeMax(*Server) (inEpoll, inUse int32, ok bool) { return 0, 0, false }

func owners(*handle) int32 { return 0 }

func setFeedHook(t *testing.T, _ *Server, _ func([]byte)) { t.Skip(noProbe) }

func setAccept4(t *testing.T, _ *Server, _ func(fd, flags int) (int, unix.Sockaddr, error)) {
	t.Skip(noProbe)
}

func setHandshakeHook(t *testing.T, _ *Server, _ func()) { t.Skip(noProbe) }

func handshakeAborts(*Server) int32 { return 0 }
