//go:build !lfvariant

package lf

// variant is the pool's comparison setting (variant_on.go). In a build
// without the lfvariant tag, which is every product build, it is empty and
// its knobs are constant methods the compiler inlines and folds: the pool
// is LIFO, unlocked, parked in the runtime poller and takes one event per
// wait, and the hot path reads no setting for it.
type variant struct{}

func (variant) fifo() bool         { return false }
func (variant) lockOSThread() bool { return false }
func (variant) blockingWait() bool { return false }
func (variant) eventsPerWait() int { return 1 }
