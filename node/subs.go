package node

import (
	"sync"
	"sync/atomic"
)

// Subscription delivers leadership changes to one watcher without ever
// blocking the node: when its buffer is full the oldest pending event is
// dropped (and counted), so the newest state always arrives.
type Subscription struct {
	ch      chan LeaderInfo
	dropped atomic.Uint64
	once    sync.Once
	hub     *hub
}

// C delivers the events; it is closed when the subscription ends.
func (s *Subscription) C() <-chan LeaderInfo { return s.ch }

// Dropped counts events this subscriber lost because it read too slowly.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription.
func (s *Subscription) Close() { s.hub.remove(s) }

type hub struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool // the node stopped: no more events
	// Dropped counts events dropped across all subscribers.
	dropped atomic.Uint64
}

const subBuffer = 64

// add registers a subscriber whose first event is current(). It reads the
// current state under the hub's lock, so a change the loop publishes
// meanwhile is either in that first event or delivered after it, never lost
// between the read and the registration. (The state is updated before it
// is published, so the subscriber may see the newest state twice.) The
// node's announcer (announce.go) publishes, and registers subscribers,
// under its own lock: current and every event are what Node.Leader
// answered at that moment, lease included.
func (h *hub) add(current func() LeaderInfo) *Subscription {
	s := &Subscription{ch: make(chan LeaderInfo, subBuffer), hub: h}
	h.mu.Lock()
	s.ch <- current()
	if h.closed {
		// The node has stopped: the subscriber gets the last state and
		// the end of the stream, not a stream that never moves again.
		h.mu.Unlock()
		s.once.Do(func() { close(s.ch) })
		return s
	}
	if h.subs == nil {
		h.subs = map[*Subscription]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) remove(s *Subscription) {
	h.mu.Lock()
	_, ok := h.subs[s]
	delete(h.subs, s)
	h.mu.Unlock()
	if ok {
		s.once.Do(func() { close(s.ch) })
	}
}

// publish never blocks. Its callers (the loop, the lease timer) hold the
// announcer's lock, and it holds the hub's: a subscriber's channel has one
// sender at a time, so the drop-oldest dance is safe.
func (h *hub) publish(li LeaderInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		for {
			select {
			case s.ch <- li:
			default:
				select {
				case <-s.ch:
					s.dropped.Add(1)
					h.dropped.Add(1)
				default:
				}
				continue
			}
			break
		}
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	subs := h.subs
	h.subs, h.closed = nil, true
	h.mu.Unlock()
	for s := range subs {
		s.once.Do(func() { close(s.ch) })
	}
}
