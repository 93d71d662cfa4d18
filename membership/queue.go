package membership

import "sync"

// eventQueue hands events from memberlist's callbacks to the Events channel.
// push never blocks (the queue is unbounded), so memberlist is never held up
// by a slow reader, and no event is dropped while the queue is open; one
// goroutine forwards events, in order, to the channel.
type eventQueue struct {
	mu     sync.Mutex
	buf    []Event
	closed bool
	wake   chan struct{} // capacity 1: "buf may be non-empty"
	done   chan struct{} // closed by close
	out    chan Event
}

func newEventQueue() *eventQueue {
	q := &eventQueue{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan Event)}
	go q.run()
	return q
}

// push queues events; after close it does nothing.
func (q *eventQueue) push(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.buf = append(q.buf, evs...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops the forwarder, which closes the channel; events still queued
// are discarded.
func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.buf = nil
		close(q.done)
	}
}

func (q *eventQueue) run() {
	defer close(q.out)
	for {
		q.mu.Lock()
		if len(q.buf) == 0 {
			q.buf = nil // let a burst's backing array go
			q.mu.Unlock()
			select {
			case <-q.wake:
				continue
			case <-q.done:
				return
			}
		}
		ev := q.buf[0]
		q.buf[0] = Event{}
		q.buf = q.buf[1:]
		q.mu.Unlock()
		select {
		case q.out <- ev:
		case <-q.done:
			return
		}
	}
}
