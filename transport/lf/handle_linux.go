//go:build linux

package lf

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

// Ownership states of a handle. A handle is armed while it waits in epoll
// and nobody touches it; whoever moves it armed→held (the pool goroutine
// that dispatched its event, or a shutdown sweep) is its only user until it
// stores armed again. A closed handle stays held forever.
const (
	stArmed int32 = iota
	stHeld
)

const (
	evConn     = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT
	evConnOut  = evConn | unix.EPOLLOUT
	evDraining = unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLONESHOT
	evListener = unix.EPOLLIN | unix.EPOLLONESHOT
	evReadable = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR
)

type kind uint8

const (
	kindConn kind = iota
	kindListener
	kindTimer // the timerfd of the connection deadlines
)

// handle is a file descriptor registered in the epoll set: the listener or
// one connection.
type handle struct {
	fd   int
	gen  uint32 // registration generation, carried in the event's Pad
	kind kind

	state atomic.Int32  // stArmed / stHeld
	want  atomic.Uint32 // events to arm with, set by the owner before releasing
	probe handleProbe   // empty outside tests (probe_off_linux.go)

	// fdMu guards the descriptor's lifetime: a re-arm that trails a
	// release must not reach a descriptor that was closed (and whose number
	// may already belong to another connection).
	fdMu       sync.Mutex
	registered bool // EPOLL_CTL_ADD done
	closed     bool

	// Owner-only fields (connections).
	sess   *engine.Session
	tls    *tlsConn // nil on a plain connection
	goaway bool
	// Deadlines, in nanoseconds since the server started (Server.clock):
	// until the handshake is done, when the connection was accepted (for
	// the handshake timeout); then when the last sweep saw it active (for
	// the idle timeout). active says bytes arrived since the last sweep.
	since          int64
	active, idling bool // idling: since counts idle time, not the handshake
}

// acquire moves h from armed to held. It fails when somebody else holds h:
// the event being dispatched is stale or spurious and is dropped.
func (s *Server) acquire(h *handle) bool {
	if !h.state.CompareAndSwap(stArmed, stHeld) {
		return false
	}
	s.probe.acquired(h)
	return true
}

// disown gives h up; the caller must re-arm it (or let the taker that
// reacquires it do so) right after.
func (s *Server) disown(h *handle) {
	s.probe.released(h)
	h.state.Store(stArmed)
}

// arm (re-)registers h in the epoll set with the events its last owner
// asked for. It may run after h changed hands; the latest wish wins and a
// redundant arm only costs a spurious event.
func (s *Server) arm(h *handle) {
	h.fdMu.Lock()
	if h.closed {
		h.fdMu.Unlock()
		return
	}
	ev := unix.EpollEvent{Events: h.want.Load(), Fd: int32(h.fd), Pad: int32(h.gen)}
	op := unix.EPOLL_CTL_MOD
	if !h.registered {
		op = unix.EPOLL_CTL_ADD
	}
	err := rawsys.EpollCtl(s.epfd, op, h.fd, &ev)
	if err == nil {
		h.registered = true
	}
	h.fdMu.Unlock()
	if err != nil && h.kind == kindConn && s.acquire(h) {
		s.connErrs.Add(1)
		s.closeConn(h)
	}
}

// closeFD removes h from the epoll set and closes it, once.
func (s *Server) closeFD(h *handle) {
	h.fdMu.Lock()
	defer h.fdMu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	if h.registered {
		_ = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, h.fd, nil)
	}
	unix.Close(h.fd)
}
