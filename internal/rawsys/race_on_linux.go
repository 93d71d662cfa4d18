//go:build linux && race

package rawsys

import (
	"runtime"
	"unsafe"
)

// Under the race detector the raw reads and writes report the buffer
// accesses the kernel makes, as x/sys/unix's Read and Write do.

func raceWrote(p []byte) {
	if len(p) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	}
}

func raceRead(p []byte) {
	if len(p) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	}
}
