package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/node"
)

// A flood of health probes keeps one probe of the loop in flight, and an
// answer is not reused once given.
func TestProbesShareTheOneInFlight(t *testing.T) {
	var s probeShare
	var calls atomic.Int32
	release := make(chan struct{})
	probe := func(ctx context.Context) (node.ProbeInfo, error) {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return node.ProbeInfo{}, ctx.Err()
		}
		return node.ProbeInfo{AliveMembers: 3}, nil
	}
	const callers = 100
	var wg sync.WaitGroup
	var answered, entered atomic.Int32
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			entered.Add(1)
			c, err := s.get(ctx, probe)
			if err == nil && c.err == nil && c.p.AliveMembers == 3 {
				answered.Add(1)
			}
		}()
	}
	// Every caller has joined the one probe once it is running and more
	// callers cannot start another; let it answer.
	deadline := time.Now().Add(5 * time.Second)
	for (calls.Load() == 0 || entered.Load() < callers) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := calls.Load(); n > callers/2 {
		t.Fatalf("%d callers made %d probes of the loop; want them to share the one in flight", callers, n)
	}
	if answered.Load() != callers {
		t.Fatalf("%d of %d callers got the answer", answered.Load(), callers)
	}
	before := calls.Load()
	if _, err := s.get(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != before+1 {
		t.Fatalf("a probe after the answer reused it (calls %d -> %d)", before, calls.Load())
	}
}
