package node

import "sync"

// capped is a value kept in a lastN: it says how many a lastN keeps.
type capped interface{ keepLast() int }

func (LeaderChange) keepLast() int   { return TimelineSize }
func (ElectionRecord) keepLast() int { return ElectionsKept }

// lastN keeps the last T.keepLast() values added: the node's timeline and
// its last elections. One goroutine (the loop) adds and updates, any reads.
// The zero value is empty and ready to use.
type lastN[T capped] struct {
	mu   sync.Mutex
	buf  []T // grows to keepLast(), then wraps
	next int // once full: the oldest value, the next add's place
}

// add appends v, dropping the oldest value when full.
func (r *lastN[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < v.keepLast() {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
}

// updateLast calls f with the newest value, under the lastN's lock; not
// when it is empty.
func (r *lastN[T]) updateLast(f func(*T)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 {
		f(&r.buf[(r.next+len(r.buf)-1)%len(r.buf)])
	}
}

// list returns the values, oldest first.
func (r *lastN[T]) list() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
