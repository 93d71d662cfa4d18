package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// fakeJoiner answers Join with the results queued in answers (then
// success) and reports each call on joins.
type fakeJoiner struct {
	mu      sync.Mutex
	answers []error
	members int
	joins   chan []string
}

func newFakeJoiner(members int, answers ...error) *fakeJoiner {
	return &fakeJoiner{answers: answers, members: members, joins: make(chan []string, 100)}
}

func (f *fakeJoiner) Join(seeds []string) (int, error) {
	f.mu.Lock()
	var err error
	if len(f.answers) > 0 {
		err, f.answers = f.answers[0], f.answers[1:]
	}
	f.mu.Unlock()
	f.joins <- seeds
	if err != nil {
		return 0, err
	}
	return 1, nil
}

func (f *fakeJoiner) Members() []Meta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return make([]Meta, f.members)
}

func (f *fakeJoiner) setMembers(n int) {
	f.mu.Lock()
	f.members = n
	f.mu.Unlock()
}

func (f *fakeJoiner) wantJoin(t *testing.T, what string) {
	t.Helper()
	select {
	case <-f.joins:
	case <-time.After(deadline):
		t.Fatalf("no join %s within %v", what, deadline)
	}
}

func (f *fakeJoiner) noJoin(t *testing.T, what string, d time.Duration) {
	t.Helper()
	select {
	case <-f.joins:
		t.Fatalf("a join %s", what)
	case <-time.After(d):
	}
}

func startRetry(t *testing.T, f *fakeJoiner, seeds []string, retry, rejoin time.Duration) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	retryJoin{m: f, seeds: seeds, log: slog.New(slog.DiscardHandler), retry: retry, rejoin: rejoin}.start(stop)
}

func TestRetryJoinRetriesUntilASeedAnswers(t *testing.T) {
	down := errors.New("connection refused")
	f := newFakeJoiner(2, down, down, down)
	// The first try is made before start returns.
	startRetry(t, f, []string{"seed:7946"}, time.Millisecond, time.Hour)
	select {
	case seeds := <-f.joins:
		if len(seeds) != 1 || seeds[0] != "seed:7946" {
			t.Fatalf("joined %v", seeds)
		}
	default:
		t.Fatal("start returned before trying the seeds")
	}
	for i := range 3 {
		f.wantJoin(t, fmt.Sprintf("retry %d", i+1))
	}
	// Joined, and another member is live: no more joins.
	f.noJoin(t, "after the cluster was joined", 50*time.Millisecond)
}

func TestRetryJoinRejoinsWhenAlone(t *testing.T) {
	f := newFakeJoiner(2)
	startRetry(t, f, []string{"seed"}, time.Hour, time.Millisecond)
	f.wantJoin(t, "at start")
	f.noJoin(t, "while another member is live", 50*time.Millisecond)
	f.setMembers(1) // only this node: the other side was given up on
	f.wantJoin(t, "when alone")
}

func TestRetryJoinWithoutSeedsDoesNothing(t *testing.T) {
	f := newFakeJoiner(1)
	startRetry(t, f, nil, time.Millisecond, time.Millisecond)
	f.noJoin(t, "without seeds", 50*time.Millisecond)
}

func TestRetryJoinStopsAtShutdown(t *testing.T) {
	a := start(t, 1, "a")
	b, err := New(Config{Self: metaFor(2, "b"), BindAddr: "127.0.0.1:0", Preset: "local", Join: []string{a.LocalAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	nb := &testNode{Membership: b, t: t, logs: &logSink{}}
	b.RetryJoin()
	nb.wait("join of 1 through the seed", is(Join, 1), nil)
	a.wait("join of 2", is(Join, 2), nil)
	select {
	case <-b.stopRetry:
		t.Fatal("retries stopped before Shutdown")
	default:
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.stopRetry:
	default:
		t.Fatal("Shutdown did not stop the retries")
	}
}
