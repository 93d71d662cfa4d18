package node

import "sync"

// sized is a value kept in a ring: it says how many the ring keeps.
type sized interface{ ringSize() int }

func (LeaderChange) ringSize() int   { return TimelineSize }
func (ElectionRecord) ringSize() int { return ElectionsKept }

// ring keeps the last T.ringSize() values added: the node's timeline and
// its last elections. One goroutine (the loop) adds and updates, any reads.
// The zero value is empty and ready to use.
type ring[T sized] struct {
	mu   sync.Mutex
	buf  []T // grows to ringSize, then wraps
	next int // once full: the oldest value, the next add's place
}

// add appends v, dropping the oldest value when full.
func (r *ring[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < v.ringSize() {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
}

// updateLast calls f with the newest value, under the ring's lock; not
// when the ring is empty.
func (r *ring[T]) updateLast(f func(*T)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 {
		f(&r.buf[(r.next+len(r.buf)-1)%len(r.buf)])
	}
}

// list returns the values, oldest first.
func (r *ring[T]) list() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
