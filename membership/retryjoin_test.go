package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// fakeJoiner answers Join with the results queued in answers (then
// success) and reports each call on joins; rejoin rounds see targets as the
// missing addresses, and joinAddr fails for the addresses in fail (waiting
// for release first when it is set) and reports each call on addrJoins.
type fakeJoiner struct {
	mu          sync.Mutex
	answers     []error
	targets     []string
	fail        map[string]bool
	release     chan struct{}
	inFlight    int
	maxInFlight int
	joins       chan []string
	addrJoins   chan string
}

func newFakeJoiner(answers ...error) *fakeJoiner {
	return &fakeJoiner{answers: answers, fail: map[string]bool{}, joins: make(chan []string, 100), addrJoins: make(chan string, 10000)}
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

func (f *fakeJoiner) rejoinTargets(context.Context) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.targets)
}

func (f *fakeJoiner) joinAddr(addr string) error {
	f.mu.Lock()
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	release, fail := f.release, f.fail[addr]
	f.mu.Unlock()
	if release != nil {
		<-release
	}
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	f.addrJoins <- addr
	if fail {
		return errors.New("connection refused")
	}
	return nil
}

func (f *fakeJoiner) short() bool        { return false }
func (f *fakeJoiner) anyMember() string  { return "" }
func (f *fakeJoiner) admittedCount() int { return 0 }
func (f *fakeJoiner) synced()            {}

func (f *fakeJoiner) setTargets(addrs ...string) {
	f.mu.Lock()
	f.targets = addrs
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
	case addr := <-f.addrJoins:
		t.Fatalf("a join of %s %s", addr, what)
	case <-time.After(d):
	}
}

func (f *fakeJoiner) wantAddrJoin(t *testing.T, want, what string) {
	t.Helper()
	end := time.After(deadline)
	for {
		select {
		case addr := <-f.addrJoins:
			if addr == want {
				return
			}
		case <-end:
			t.Fatalf("no join of %s %s within %v", want, what, deadline)
		}
	}
}

func startRetry(t *testing.T, f *fakeJoiner, seeds []string, retry, rejoin, maxBackoff time.Duration) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	retryJoin{m: f, seeds: seeds, log: slog.New(slog.DiscardHandler), retry: retry, rejoin: rejoin,
		maxBackoff: maxBackoff, perRound: 3}.start(stop)
}

func TestRetryJoinRetriesUntilASeedAnswers(t *testing.T) {
	down := errors.New("connection refused")
	f := newFakeJoiner(down, down, down)
	// The first try is made before start returns.
	startRetry(t, f, []string{"seed:7946"}, time.Millisecond, time.Hour, time.Hour)
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
	// Joined: no more joins of the seeds.
	f.noJoin(t, "after the cluster was joined", 50*time.Millisecond)
}

// Not only when alone: any seed or known member missing from the live view
// is joined again, and only those.
func TestRetryJoinRejoinsWhateverIsMissing(t *testing.T) {
	f := newFakeJoiner()
	startRetry(t, f, []string{"seed"}, time.Hour, time.Millisecond, time.Millisecond)
	f.wantJoin(t, "at start")
	f.noJoin(t, "while nothing is missing", 50*time.Millisecond)
	f.setTargets("10.0.0.3:7946") // one member of five went missing
	f.wantAddrJoin(t, "10.0.0.3:7946", "when it went missing")
	f.setTargets()
	for len(f.addrJoins) > 0 { // joins of the round in flight
		<-f.addrJoins
	}
	time.Sleep(5 * time.Millisecond)
	for len(f.addrJoins) > 0 {
		<-f.addrJoins
	}
	f.noJoin(t, "once it is back", 50*time.Millisecond)
}

func TestRetryJoinBacksOffPerAddress(t *testing.T) {
	f := newFakeJoiner()
	f.fail["dead:1"] = true
	f.setTargets("dead:1", "flaky:1")
	const rejoin, maxBackoff = 2 * time.Millisecond, 40 * time.Millisecond
	startRetry(t, f, nil, time.Hour, rejoin, maxBackoff)
	time.Sleep(400 * time.Millisecond)
	counts := map[string]int{}
	for len(f.addrJoins) > 0 {
		counts[<-f.addrJoins]++
	}
	// Without back-off each address would be joined ~200 times. The dead one
	// backs off to one try per ~40ms: at most ~15 tries (2+4+...+32, then
	// 40ms); the one that answers is tried every round.
	if counts["dead:1"] == 0 || counts["dead:1"] > 20 {
		t.Errorf("the dead address was joined %d times in 400ms", counts["dead:1"])
	}
	if counts["flaky:1"] < 2*counts["dead:1"] {
		t.Errorf("an answering address was joined %d times, a dead one %d: back-off is not per address", counts["flaky:1"], counts["dead:1"])
	}
}

func TestRetryJoinBoundsJoinsInFlight(t *testing.T) {
	f := newFakeJoiner()
	f.release = make(chan struct{})
	var addrs []string
	for i := range 20 {
		addrs = append(addrs, fmt.Sprintf("10.0.0.%d:7946", i))
	}
	f.setTargets(addrs...)
	startRetry(t, f, nil, time.Hour, time.Millisecond, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // ~50 rounds
	f.mu.Lock()
	got := f.maxInFlight
	f.mu.Unlock()
	close(f.release)
	if got != 3 {
		t.Fatalf("%d joins in flight at most, want perRound = 3", got)
	}
}

func TestRetryJoinWithoutSeedsRejoinsKnownMembers(t *testing.T) {
	f := newFakeJoiner()
	startRetry(t, f, nil, time.Millisecond, time.Millisecond, time.Millisecond)
	f.noJoin(t, "without seeds nor missing members", 50*time.Millisecond)
	f.setTargets("known:7946")
	f.wantAddrJoin(t, "known:7946", "of a known member without seeds")
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

// RetryJoin's first attempt reports Synced after the Join of every member
// the seed knew, proofs or not: a reader that has taken Synced has the
// view gossip had when the node started, not a part of it still on its
// way. With proofs (peer TLS) the Joins come as the proofs end, on other
// goroutines, and Synced waits for them.
func TestRetryJoinReportsSyncedAfterTheJoinsItLearnt(t *testing.T) {
	for _, proofs := range []bool{false, true} {
		t.Run(fmt.Sprintf("proofs=%v", proofs), func(t *testing.T) {
			nodes := cluster(t, 1, 2, 3)
			cfg := Config{Self: metaFor(4, "d"), BindAddr: "127.0.0.1:0", Preset: "local", Join: []string{nodes[0].LocalAddr()}}
			if proofs {
				cfg.Prove = func(ctx context.Context, id election.NodeID, peer string) error {
					select {
					case <-time.After(20 * time.Millisecond): // a handshake
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			d, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Shutdown() })
			nd := &testNode{Membership: d, t: t, logs: &logSink{}}
			d.RetryJoin()
			nd.wait("synced", func(ev Event) bool { return ev.Type == Synced }, nil)
			var joined []election.NodeID
			for _, ev := range nd.pending {
				if ev.Type == Join {
					joined = append(joined, ev.Member.ID)
				}
			}
			slices.Sort(joined)
			if !slices.Equal(joined, []election.NodeID{1, 2, 3}) {
				t.Fatalf("joins before Synced: %v, want 1, 2, 3 (saw %v)", joined, nd.seen)
			}
		})
	}
}

// The syncs of a node short of bootstrap-expect back off from the first
// period while its view stands still, and come at the first period again
// once it has grown: a cluster still starting is learnt a second after its
// members join, not after a back-off of 4 or 8 seconds.
func TestShortSyncsStayFrequentWhileTheViewGrows(t *testing.T) {
	s := shortSchedule{first: time.Second, max: 8 * time.Second}
	steps := []struct {
		live int
		want time.Duration
	}{
		{0, time.Second},     // no member yet
		{0, 2 * time.Second}, // nothing new: back off
		{3, time.Second},     // grew
		{10, time.Second},    // grew
		{10, 2 * time.Second},
		{10, 4 * time.Second},
		{10, 8 * time.Second},
		{10, 8 * time.Second}, // capped
		{9, 8 * time.Second},  // a member lost is no growth
		{10, 8 * time.Second}, // nor is its return
		{11, time.Second},
	}
	for i, st := range steps {
		if got := s.next(st.live); got != st.want {
			t.Fatalf("step %d (%d live): wait %v, want %v", i, st.live, got, st.want)
		}
	}
}
