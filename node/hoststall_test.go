package node

import (
	"context"
	"sync"
	"testing"
	"time"
)

// hostWatch measures how long this process went without running a
// goroutine that wakes every millisecond: on a loaded host (CI runs the
// tools' chaos beside these tests on two cores) every node loop of the
// in-process cluster stands still as long, and a stall past a heartbeat
// timeout is, by design, announced. A test that asserts nothing is
// announced at rest judges only windows the host did not stall.
type hostWatch struct {
	mu      sync.Mutex
	longest time.Duration
	stop    chan struct{}
	done    chan struct{}
}

func watchHost() *hostWatch {
	w := &hostWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case now := <-t.C:
				w.mu.Lock()
				w.longest = max(w.longest, now.Sub(last))
				w.mu.Unlock()
				last = now
			}
		}
	}()
	return w
}

// end stops the watch and returns the longest gap it saw.
func (w *hostWatch) end() time.Duration {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// calmWindows runs window up to tries times until the host did not stand
// still longer than calm during it, and reports whether one was calm (the
// gaps seen otherwise, for the log). window must reset what it counts.
func calmWindows(t *testing.T, tries int, calm time.Duration, window func()) bool {
	t.Helper()
	var gaps []time.Duration
	for range tries {
		w := watchHost()
		window()
		if gap := w.end(); gap > calm {
			gaps = append(gaps, gap)
			continue
		}
		if len(gaps) > 0 {
			t.Logf("windows the host stalled first, longest gaps %v (calm: %v)", gaps, calm)
		}
		return true
	}
	t.Logf("the host stalled every one of %d windows, longest gaps %v (calm: %v)", tries, gaps, calm)
	return false
}

// nodeStalls returns the longest stall any of c's nodes found in its own
// loop since it was last asked (pairBeats.longestStall: two beat intervals
// or more), and clears it.
func (c *cluster) nodeStalls(t *testing.T) (d time.Duration) {
	t.Helper()
	for _, nd := range c.nodes {
		if err := nd.do(context.Background(), func() error {
			d = max(d, nd.named.pairs.longestStall)
			nd.named.pairs.longestStall = 0
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// stillWindows is calmWindows that also runs a window again when one of
// c's nodes found its loop stalled during it: a node loop held up past
// a heartbeat timeout is found by its peers and repaired by design, and
// the watch's ticker, a goroutine of its own, need not have stood still
// as long. Each window is run to its end; window must reset what it
// counts.
func (c *cluster) stillWindows(t *testing.T, tries int, calm time.Duration, window func()) bool {
	t.Helper()
	var stalled []time.Duration
	ok := calmWindows(t, tries, calm, func() {
		for {
			c.nodeStalls(t)
			window()
			s := c.nodeStalls(t)
			if s == 0 || len(stalled) >= tries {
				return
			}
			stalled = append(stalled, s)
		}
	})
	if len(stalled) > 0 {
		t.Logf("windows in which a node found its loop stalled: %v", stalled)
	}
	return ok && len(stalled) < tries
}
