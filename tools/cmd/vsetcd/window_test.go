package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestWindowBoundsAndAIMD: no more than cur requests at once; one burst of
// overload answers halves the window once; successes grow it back by one
// each, up to hi; it never falls below lo.
func TestWindowBoundsAndAIMD(t *testing.T) {
	w := newWindow(2, 8)
	for range 8 {
		w.acquire()
	}
	if w.tryAcquire() {
		t.Fatal("a 9th request got in with a window of 8")
	}
	done := make(chan struct{})
	go func() { w.acquire(); close(done) }() // waits for a slot
	// All 8 refused for load: the first halves (8 → 4); the other 7 were
	// sent before the halving and must not halve again.
	for range 8 {
		w.release(true)
	}
	select {
	case <-done: // the waiting one got in: 1 in flight, window 4
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting acquire did not get a freed slot")
	}
	if cur, cuts := w.size(); cur != 4 || cuts != 1 {
		t.Fatalf("after one burst of refusals: window %d, %d cuts; want 4, 1", cur, cuts)
	}
	// A refusal sent after the halving halves again, not below lo.
	w.release(true)
	if cur, _ := w.size(); cur != 2 {
		t.Fatalf("window %d after a fresh refusal, want 2", cur)
	}
	w.acquire()
	w.release(true)
	if cur, _ := w.size(); cur != 2 {
		t.Fatalf("window %d, want the floor 2", cur)
	}
	for range 20 {
		w.acquire()
		w.release(false)
	}
	if cur, _ := w.size(); cur != 8 {
		t.Fatalf("window %d after 20 successes, want the ceiling 8", cur)
	}
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{0, 0, 25 * time.Millisecond},
		{0, 0.999999, 50 * time.Millisecond},
		{1, 0.5, 75 * time.Millisecond},
		{5, 0, 800 * time.Millisecond},
		{6, 0, time.Second},
		{60, 0, time.Second},
		{1000, 0.999999, 2 * time.Second},
	} {
		if got := backoff(c.attempt, c.r).Round(time.Millisecond); got != c.want {
			t.Errorf("backoff(%d, %v) = %v, want %v", c.attempt, c.r, got, c.want)
		}
	}
}

func TestOverloaded(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrTooManyRequests, true},
		{rpctypes.ErrGRPCRequestTooManyRequests, true},
		{fmt.Errorf("campaign: %w", rpctypes.ErrTooManyRequests), true},
		{rpctypes.ErrTimeout, false},
		{errors.New("requested lease not found"), false},
	} {
		if got := overloaded(c.err); got != c.want {
			t.Errorf("overloaded(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
