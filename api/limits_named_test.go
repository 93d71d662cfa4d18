package api

import (
	"errors"
	"github.com/electord/electord/node"
	"testing"
)

// stubBackend serves subscriptions that never deliver; nothing else.
type stubBackend struct{ Backend }

type stubSub struct{ c chan node.LeaderInfo }

func (s stubSub) C() <-chan node.LeaderInfo { return s.c }
func (stubSub) Dropped() uint64             { return 0 }
func (stubSub) Close()                      {}

func (stubBackend) Subscribe() (Subscription, error) { return stubSub{make(chan node.LeaderInfo)}, nil }

// Named elections' streams share the watch limit with the default
// election's watches.
func TestNamedStreamsCountAgainstMaxWatchers(t *testing.T) {
	b := LimitWatchers(stubBackend{}, 2)
	sub, err := b.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	release, err := streamSlot(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streamSlot(b); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("a third stream: %v, want ErrTooManyWatchers", err)
	}
	if _, err := b.Subscribe(); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("a watch beyond the limit: %v, want ErrTooManyWatchers", err)
	}
	release()
	sub.Close()
	if _, err := streamSlot(b); err != nil {
		t.Fatalf("after both closed: %v", err)
	}
	// Without a limit, nothing is counted.
	if _, err := streamSlot(stubBackend{}); err != nil {
		t.Fatal(err)
	}
}
