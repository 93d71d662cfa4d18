package fifo

import (
	"sync"
	"testing"
	"time"
)

func TestOrderAcrossGrowthAndWrap(t *testing.T) {
	q := New[int](100)
	next, want := 0, 0
	// Interleave pushes and pops so the ring wraps while it grows.
	for round := range 50 {
		for range round%4 + 1 {
			if !q.Push(next) {
				t.Fatalf("push %d refused with %d queued of 100", next, q.Len())
			}
			next++
		}
		for range round % 5 {
			v, ok := q.Pop()
			if !ok || v != want {
				t.Fatalf("pop = %d, %v; want %d", v, ok, want)
			}
			want++
		}
	}
	for q.Len() > 0 {
		v, _ := q.Pop()
		if v != want {
			t.Fatalf("pop = %d, want %d", v, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("popped %d of %d", want, next)
	}
}

func TestRefusesAtItsBound(t *testing.T) {
	q := New[int](5)
	for i := range 5 {
		if !q.Push(i) {
			t.Fatalf("push %d of 5 refused", i)
		}
	}
	if q.Push(5) {
		t.Fatal("a sixth push into a queue of 5 was accepted")
	}
	if v, _ := q.Pop(); v != 0 {
		t.Fatalf("pop = %d, want 0", v)
	}
	if !q.Push(5) {
		t.Fatal("a push after a pop was refused")
	}
	if q.Len() != 5 {
		t.Fatalf("len = %d, want 5", q.Len())
	}
}

// The point of the package: an idle queue holds a small ring, and a burst's
// ring is let go once the burst has been taken.
func TestMemoryFollowsLength(t *testing.T) {
	q := New[[16]uint64](4096)
	if len(q.ring) != 0 {
		t.Fatalf("a new queue holds a ring of %d", len(q.ring))
	}
	q.Push([16]uint64{})
	if len(q.ring) != minRing {
		t.Fatalf("one element: ring of %d, want %d", len(q.ring), minRing)
	}
	for range 1000 {
		q.Push([16]uint64{})
	}
	if len(q.ring) != 1024 {
		t.Fatalf("1,001 elements: ring of %d, want 1024", len(q.ring))
	}
	for q.Len() > 0 {
		q.Pop()
	}
	if q.ring != nil {
		t.Fatalf("an emptied queue kept a ring of %d", len(q.ring))
	}
	// A small ring is kept: a queue that goes between 0 and 1 does not
	// allocate on every push.
	q.Push([16]uint64{})
	q.Pop()
	if len(q.ring) != minRing {
		t.Fatalf("after one push and pop: ring of %d, want %d kept", len(q.ring), minRing)
	}
}

func TestPopReleasesWhatItHandsOut(t *testing.T) {
	q := New[*int](8)
	q.Push(new(int))
	q.Push(new(int))
	q.Pop()
	if q.ring[0] != nil {
		t.Fatal("the ring still points at the element Pop returned")
	}
}

func TestReadyWhileNotEmpty(t *testing.T) {
	q := New[int](10)
	select {
	case <-q.Ready():
		t.Fatal("an empty queue is ready")
	default:
	}
	q.Push(1)
	q.Push(2)
	for want := 1; want <= 2; want++ {
		select {
		case <-q.Ready():
		default:
			t.Fatalf("not ready with %d queued", q.Len())
		}
		if v, ok := q.Pop(); !ok || v != want {
			t.Fatalf("pop = %d, %v; want %d", v, ok, want)
		}
	}
	select {
	case <-q.Ready():
		t.Fatal("ready after the last pop")
	default:
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("pop from an empty queue reported an element")
	}
}

// Producers on many goroutines, one consumer waiting on Ready: every
// element arrives once, each producer's in its order, and the consumer
// never waits with elements queued.
func TestConcurrentProducersOneConsumer(t *testing.T) {
	const producers, each = 4, 500
	q := New[[2]int](64)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				if q.Push([2]int{p, i}) {
					i++
				}
			}
		}()
	}
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	deadline := time.After(30 * time.Second)
	for got := 0; got < producers*each; {
		select {
		case <-q.Ready():
		case <-deadline:
			t.Fatalf("waited on Ready with %d of %d taken, %d queued", got, producers*each, q.Len())
		}
		v, ok := q.Pop()
		if !ok {
			continue
		}
		if v[1] != last[v[0]]+1 {
			t.Fatalf("producer %d: got %d after %d", v[0], v[1], last[v[0]])
		}
		last[v[0]] = v[1]
		got++
	}
	wg.Wait()
	if q.Len() != 0 {
		t.Fatalf("%d left", q.Len())
	}
}

// PopIf takes the oldest element only when it is accepted, and leaves the
// queue (and its Ready) as it was otherwise.
func TestPopIfStopsAtTheFirstRefused(t *testing.T) {
	q := New[int](10)
	for _, v := range []int{2, 4, 5, 6} {
		q.Push(v)
	}
	even := func(v int) bool { return v%2 == 0 }
	var got []int
	for v, ok := q.PopIf(even); ok; v, ok = q.PopIf(even) {
		got = append(got, v)
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Fatalf("PopIf took %v; want [2 4]", got)
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("not ready with a refused element queued")
	}
	if v, ok := q.Pop(); !ok || v != 5 {
		t.Fatalf("pop after PopIf = %d, %v; want 5", v, ok)
	}
	if _, ok := New[int](1).PopIf(even); ok {
		t.Fatal("PopIf from an empty queue reported an element")
	}
}
