// Package fifo is a bounded first-in, first-out queue whose memory follows
// its length.
//
// A buffered channel allocates its whole buffer when it is made, and while
// the element type holds pointers the garbage collector scans all of it on
// every cycle, so every page of it is resident. A node keeps such queues for
// the worst case (4,096 inbound messages, 256 per peer outbound) and uses
// almost none of it while idle: 1.2 MB for the inbox and 35 KB per peer,
// 4.4 MB per node at 128 processes (docs/BENCHMARKS.md, "Idle cost and
// scale"). A Queue holds a ring that grows by doubling as messages arrive,
// up to its bound, and is let go once it is empty again; it refuses a push
// at the same bound the channel did.
package fifo

import "sync"

// minRing is the first ring's size; a ring above keepRing is dropped when
// the queue empties, so one burst does not keep its memory for good.
const (
	minRing  = 8
	keepRing = 64
)

// Queue is a bounded FIFO for one consumer and any number of producers.
// Ready has a value whenever the queue holds something, so the consumer can
// wait on it in a select beside other channels, then Pop one element. All
// methods are safe for concurrent use.
type Queue[T any] struct {
	max   int
	ready chan struct{}

	mu   sync.Mutex
	ring []T // len(ring) is 0 or a power of two times minRing, at most max rounded up
	head int // index of the oldest element
	n    int // elements queued
}

// New returns an empty queue that holds at most max elements (max ≥ 1).
func New[T any](max int) *Queue[T] {
	if max < 1 {
		panic("fifo: a queue must hold at least one element")
	}
	return &Queue[T]{max: max, ready: make(chan struct{}, 1)}
}

// Push appends v and reports true, or reports false and leaves the queue as
// it was when it already holds its maximum.
func (q *Queue[T]) Push(v T) bool {
	q.mu.Lock()
	if q.n == q.max {
		q.mu.Unlock()
		return false
	}
	if q.n == len(q.ring) {
		q.grow()
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = v
	q.n++
	q.mu.Unlock()
	q.signal()
	return true
}

// Pop removes and returns the oldest element; ok is false when the queue
// is empty (a stale Ready value after Drain, or a second consumer). When
// elements remain, Ready has a value again.
func (q *Queue[T]) Pop() (v T, ok bool) {
	return q.PopIf(nil)
}

// PopIf is Pop of the oldest element only if take (nil: any) accepts it;
// otherwise the queue is left as it was and ok is false. take runs under
// the queue's lock: it must not call the queue. It lets the consumer take
// a run of like elements at once and stop before the first unlike one.
func (q *Queue[T]) PopIf(take func(T) bool) (v T, ok bool) {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return v, false
	}
	if take != nil && !take(q.ring[q.head]) {
		q.mu.Unlock()
		q.signal() // still not empty
		return v, false
	}
	var zero T
	v = q.ring[q.head]
	q.ring[q.head] = zero // the queue must not keep what it handed out alive
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.n--
	more := q.n > 0
	if !more {
		q.head = 0
		if len(q.ring) > keepRing {
			q.ring = nil
		}
	}
	q.mu.Unlock()
	if more {
		q.signal()
	}
	return v, true
}

// Ready has a value while the queue is not empty (and, rarely, one more
// after it emptied: Pop then reports false).
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Len is the number of elements queued.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Max is the bound given to New.
func (q *Queue[T]) Max() int { return q.max }

func (q *Queue[T]) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// grow doubles the ring (a full one: q.n == len(q.ring)), keeping order.
func (q *Queue[T]) grow() {
	size := max(minRing, 2*len(q.ring))
	ring := make([]T, size)
	k := copy(ring, q.ring[q.head:])
	copy(ring[k:], q.ring[:q.head])
	q.ring, q.head = ring, 0
}
