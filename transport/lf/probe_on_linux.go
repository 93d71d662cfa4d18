//go:build linux && (race || lfprobe)

package lf

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The probe is the pool's test instrumentation, compiled in only under the
// race detector (go test -race, how this repository runs its tests) or
// with -tags lfprobe; elsewhere probe_off_linux.go makes it empty. It
// measures the two invariants of the pattern, at most one goroutine inside
// epoll_wait and at most one owner of a handle, and lets a test see every
// chunk read or replace accept4.
const probing = true

type serverProbe struct {
	inEpoll    atomic.Int32 // goroutines inside epoll_wait now
	maxInEpoll atomic.Int32 // the most ever seen there at once
	maxInUse   atomic.Int32 // the most owners any handle ever had at once

	// feedHook, when set (before Serve), sees every chunk read from a
	// connection before the Session does, on the handling goroutine.
	feedHook func(p []byte)
	// accept4Hook, when set (before Serve), replaces unix.Accept4.
	accept4Hook func(fd, flags int) (int, unix.Sockaddr, error)
	// handshakeHook, when set (before Serve), runs on each TLS handshake
	// goroutine once its handshake is registered (abortHandshakes can
	// reach it), just before the handshake starts.
	handshakeHook func()
	// aborts counts the runs of abortHandshakes.
	aborts atomic.Int32
}

type handleProbe struct {
	inUse atomic.Int32 // owners right now; must never exceed 1
}

// raise makes m at least n.
func raise(m *atomic.Int32, n int32) {
	for {
		old := m.Load()
		if n <= old || m.CompareAndSwap(old, n) {
			return
		}
	}
}

// acquired: h has one more owner.
func (p *serverProbe) acquired(h *handle) { raise(&p.maxInUse, h.probe.inUse.Add(1)) }

// released: h has one owner less.
func (p *serverProbe) released(h *handle) { h.probe.inUse.Add(-1) }

func (p *serverProbe) enterEpoll() { raise(&p.maxInEpoll, p.inEpoll.Add(1)) }
func (p *serverProbe) leaveEpoll() { p.inEpoll.Add(-1) }

func (p *serverProbe) feed(b []byte) {
	if p.feedHook != nil {
		p.feedHook(b)
	}
}

func (p *serverProbe) handshaking() {
	if p.handshakeHook != nil {
		p.handshakeHook()
	}
}

func (p *serverProbe) aborted() { p.aborts.Add(1) }

func (p *serverProbe) accept4(fd, flags int) (int, unix.Sockaddr, error) {
	if p.accept4Hook != nil {
		return p.accept4Hook(fd, flags)
	}
	return unix.Accept4(fd, flags)
}
