package node

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// loopState is the leader state the loop publishes, read by subscribers.
type loopState struct {
	mu sync.Mutex
	li LeaderInfo
}

func (l *loopState) get() LeaderInfo   { l.mu.Lock(); defer l.mu.Unlock(); return l.li }
func (l *loopState) set(li LeaderInfo) { l.mu.Lock(); l.li = li; l.mu.Unlock() }

// The interleaving the old order lost, forced: the loop updates the state
// and publishes it right after the new subscriber read the current state.
// Read under the hub's lock, the publish waits for the registration and
// then reaches the subscriber; read before the lock (the old order), the
// publish went to nobody and the subscriber stayed at the older state.
func TestSubscribeRacingOnePublishGetsIt(t *testing.T) {
	var h hub
	st := &loopState{li: LeaderInfo{ID: 1, Term: 1, State: StateLeader}}
	published := make(chan struct{})
	current := func() LeaderInfo {
		li := st.get()
		go func() {
			next := LeaderInfo{ID: 2, Term: 2, State: StateLeader}
			st.set(next)
			h.publish(next)
			close(published)
		}()
		select {
		case <-published: // the old order: the publish is already over
		case <-time.After(20 * time.Millisecond): // it waits for the hub's lock
		}
		return li
	}
	s := h.add(current)
	defer s.Close()
	if first := <-s.C(); first.Term != 1 {
		t.Fatalf("first event at term %d, want the state read, term 1", first.Term)
	}
	select {
	case li := <-s.C():
		if li.Term != 2 {
			t.Fatalf("second event at term %d, want the change to term 2", li.Term)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the change published while the subscriber registered never reached it (5 s)")
	}
}

// The same under load, as a stress test: subscribers register while the
// node publishes changes; after its first event each must get every later
// change, so the terms go up one at a time (the newest state may come
// twice). On the old order this caught a few in 20,000 on this machine, by
// chance; the test above forces the interleaving.
func TestSubscribeDuringPublishMissesNoChange(t *testing.T) {
	subscribers := 20000
	if testing.Short() {
		subscribers = 2000
	}
	var h hub
	var st loopState

	stop := make(chan struct{})
	done := make(chan struct{})
	var read atomic.Int64 // events the subscribers took
	go func() {
		// The publisher, as the instance loop does it: update the state
		// the readers see, then publish it. It keeps at most a few events
		// ahead of the readers, so that no buffer overflows (a drop is a
		// gap the check must not count).
		defer close(done)
		for i := 1; ; i++ {
			for int64(i)-read.Load() > 8 {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
			li := LeaderInfo{ID: 1, Term: election.Term(i), State: StateLeader}
			st.set(li)
			h.publish(li)
		}
	}()
	defer func() { close(stop); <-done }()

	gaps, checked := 0, 0
	deadline := time.After(2 * time.Minute)
	for range subscribers {
		s := h.add(st.get)
		prev := <-s.C()
		read.Add(1)
		for range 3 {
			select {
			case li := <-s.C():
				read.Add(1)
				if li.Term != prev.Term && li.Term != prev.Term+1 && s.Dropped() == 0 {
					gaps++
					if gaps <= 3 {
						t.Errorf("a subscriber saw term %d then term %d: the changes between were lost", prev.Term, li.Term)
					}
				}
				prev = li
			case <-deadline:
				t.Fatal("the subscribers took over 2 minutes")
			}
		}
		if s.Dropped() == 0 {
			checked++
		}
		s.Close()
	}
	if gaps > 0 {
		t.Errorf("%d of %d subscribers lost a change", gaps, checked)
	}
	if checked < subscribers/2 {
		t.Fatalf("only %d of %d subscribers read without drops: the check did not run", checked, subscribers)
	}
}

// A watcher that subscribes after the node stopped gets the last state and
// then the end of its stream, instead of waiting forever for an event.
func TestSubscribeAfterStopEnds(t *testing.T) {
	var h hub
	h.closeAll()
	s := h.add(func() LeaderInfo { return LeaderInfo{State: StateNoLeader, Term: 7} })
	deadline := time.After(5 * time.Second)
	var got []LeaderInfo
	for {
		select {
		case li, ok := <-s.C():
			if !ok {
				if len(got) != 1 || got[0].Term != 7 {
					t.Fatalf("events before the end: %+v, want the one last state", got)
				}
				s.Close() // closing again is harmless
				return
			}
			got = append(got, li)
		case <-deadline:
			t.Fatalf("the stream of a stopped node is still open after 5 s (events %+v)", got)
		}
	}
}
