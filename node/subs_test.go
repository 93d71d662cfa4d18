package node

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// A subscriber that registers while the node publishes changes gets, after
// its first event, every later change: reading the current state outside
// the hub's lock lost the change published between that read and the
// registration, and a watcher then showed a stale leader until the next
// change. Each subscriber here reads a few events and checks that the terms
// go up one at a time (the newest state may come twice).
func TestSubscribeDuringPublishMissesNoChange(t *testing.T) {
	const subscribers = 20000
	var h hub
	var mu sync.Mutex
	var cur LeaderInfo
	current := func() LeaderInfo { mu.Lock(); defer mu.Unlock(); return cur }

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
			mu.Lock()
			cur = li
			mu.Unlock()
			h.publish(li)
		}
	}()
	defer func() { close(stop); <-done }()

	gaps, checked := 0, 0
	deadline := time.After(2 * time.Minute)
	for range subscribers {
		s := h.add(current)
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
				t.Fatal("no events for 2 minutes")
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
