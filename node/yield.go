package node

import "runtime"

// yieldToSends lets the transport's goroutines put what the loop just
// queued on the wire before the loop blocks in a sync. With one P
// (max-procs 1, the default) a goroutine in a blocking syscall keeps the P
// until the runtime's monitor takes it back, which after an idle spell can
// be 10 ms, and otherwise until the sync returns and the loop's pass ends:
// a new leader's Coordinators, or a leaving one's handover, waited that
// long behind a sync that nothing they carry depends on. The messages are
// queued already, and with more than one P they go out during the sync
// anyway: the yield changes when they leave, never what a peer may see
// before the sync.
func yieldToSends() { runtime.Gosched() }
