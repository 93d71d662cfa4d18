package main

import (
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// window bounds the requests a candidate has outstanding at one member:
// at most cur at once. An answer that the member is overloaded halves cur
// (not below lo), any other answer grows it by one (not above hi): the
// additive-increase, multiplicative-decrease rule of TCP's congestion
// window, which settles at what the member can take instead of a rate
// guessed in advance. Requests in flight when cur was halved were sent
// under the old size: their own overload answers are the same signal and
// do not halve it again (skip counts them down), so one burst of refusals
// costs one halving, not one per refused request.
type window struct {
	mu       sync.Mutex
	cond     *sync.Cond
	cur      int // requests allowed at once
	lo, hi   int
	inflight int
	skip     int // answers still due from before the last halving
	cuts     int // halvings so far, for the report
}

func newWindow(lo, hi int) *window {
	lo, hi = max(lo, 1), max(hi, lo, 1)
	w := &window{cur: hi, lo: lo, hi: hi}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// acquire waits until fewer than cur requests are outstanding and counts
// one more.
func (w *window) acquire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.inflight >= w.cur {
		w.cond.Wait()
	}
	w.inflight++
}

// tryAcquire counts one more request if fewer than cur are outstanding.
func (w *window) tryAcquire() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight >= w.cur {
		return false
	}
	w.inflight++
	return true
}

// release counts an answer; overloaded says the member refused for load.
func (w *window) release(overloaded bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	fromBefore := w.skip > 0
	if fromBefore {
		w.skip--
	}
	switch {
	case overloaded && !fromBefore && w.cur > w.lo:
		w.cur = max(w.cur/2, w.lo)
		w.cuts++
		w.skip = w.inflight
	case !overloaded && w.cur < w.hi:
		w.cur++
	}
	w.cond.Broadcast()
}

// size is the current window and the halvings so far.
func (w *window) size() (cur, cuts int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur, w.cuts
}

// backoff is the pause before retry attempt (0 for the first retry):
// 50 ms doubling up to 2 s, scaled by 0.5–1.0 with r in [0, 1) so that
// candidates refused together do not come back together.
func backoff(attempt int, r float64) time.Duration {
	d := 2 * time.Second
	if attempt < 6 {
		d = min(50*time.Millisecond<<attempt, d)
	}
	return time.Duration(float64(d) * (0.5 + r/2))
}

// overloaded says whether err is a member refusing for load: "too many
// requests": its applied index is too far behind its committed one. The
// client hands it over as rpctypes.ErrTooManyRequests, or as the gRPC
// status when a call is wrapped; both carry the same description.
func overloaded(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, rpctypes.ErrTooManyRequests) || errors.Is(err, rpctypes.ErrGRPCRequestTooManyRequests) {
		return true
	}
	return rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCRequestTooManyRequests)
}
