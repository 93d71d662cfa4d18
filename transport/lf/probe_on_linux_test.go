//go:build linux && (race || lfprobe)

package lf

import (
	"testing"

	"golang.org/x/sys/unix"
)

// probeMax returns the most goroutines ever inside epoll_wait at once and
// the most owners a handle ever had at once.
func probeMax(s *Server) (inEpoll, inUse int32, ok bool) {
	return s.probe.maxInEpoll.Load(), s.probe.maxInUse.Load(), true
}

// owners returns h's owners now.
func owners(h *handle) int32 { return h.probe.inUse.Load() }

// setFeedHook makes f see every chunk read, before the Session does.
func setFeedHook(_ *testing.T, s *Server, f func([]byte)) { s.probe.feedHook = f }

// setAccept4 replaces unix.Accept4.
func setAccept4(_ *testing.T, s *Server, f func(fd, flags int) (int, unix.Sockaddr, error)) {
	s.probe.accept4Hook = f
}

// setHandshakeHook makes f run on each TLS handshake goroutine once the
// handshake is registered, just before it starts.
func setHandshakeHook(_ *testing.T, s *Server, f func()) { s.probe.handshakeHook = f }

// handshakeAborts returns how many times abortHandshakes has run.
func handshakeAborts(s *Server) int32 { return s.probe.aborts.Load() }
