//go:build linux

// Package rawsys makes the non-blocking system calls of the engine's
// epoll drivers (the L/F pool and the HS/HA control) as raw system calls,
// and holds the little else the two share about their sockets.
package rawsys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The drivers' sockets and epoll sets are non-blocking, so the system
// calls of the event path return at once. They are made as raw system
// calls: without the runtime's entersyscall/exitsyscall, a P is never left
// in a system call for sysmon to retake and hand to another thread. (The
// blocking epoll_wait of BlockingWait stays an ordinary system call.)
// That costs 15% less CPU per call at 4 x 16 connections and 35% at 1 x 1
// (peerbench; docs/bench/HISTORY.md).

// Read is read(2).
func Read(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e == 0 {
		raceWrote(p[:n])
	}
	return int(n), errnoErr(e)
}

// Write is write(2).
func Write(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	raceRead(p)
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	return int(n), errnoErr(e)
}

// EpollCtl is epoll_ctl(2).
func EpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return errnoErr(e)
}

// EpollWait0 is epoll_wait(2) with a zero timeout: it never blocks.
func EpollWait0(epfd int, evs []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	return int(n), errnoErr(e)
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// Out is the outgoing side of a connection's engine.Session.
type Out interface {
	Output() []byte
	Wrote(n int)
}

// Flush writes o's output to the non-blocking socket fd until it is empty
// or the socket is full. pending reports output left over for when the
// socket is writable again; err is the write error that broke the
// connection.
func Flush(fd int, o Out) (pending bool, err error) {
	for {
		out := o.Output()
		if len(out) == 0 {
			return false, nil
		}
		n, err := Write(fd, out)
		if n > 0 {
			o.Wrote(n)
		}
		switch err {
		case nil, unix.EINTR:
		case unix.EAGAIN:
			return true, nil
		default:
			return false, err
		}
	}
}
