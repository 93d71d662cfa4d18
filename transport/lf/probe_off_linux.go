//go:build linux && !race && !lfprobe

package lf

import "golang.org/x/sys/unix"

// The probe is the pool's test instrumentation (probe_on_linux.go). In a
// build without the race detector or the lfprobe tag, which is every
// production build, it is empty and its hooks are empty functions that the
// compiler inlines away: the hot path pays nothing for it.
const probing = false

type serverProbe struct{}

type handleProbe struct{}

func (*serverProbe) acquired(*handle) {}
func (*serverProbe) released(*handle) {}
func (*serverProbe) enterEpoll()      {}
func (*serverProbe) leaveEpoll()      {}
func (*serverProbe) feed([]byte)      {}
func (*serverProbe) handshaking()     {}
func (*serverProbe) aborted()         {}

func (*serverProbe) accept4(fd, flags int) (int, unix.Sockaddr, error) {
	return unix.Accept4(fd, flags)
}
