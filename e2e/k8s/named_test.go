package k8s

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electord/electord/k8s/leaderslice"
)

// electionName is the named election the Service follows in
// TestLeaderSliceFollowsANamedElection.
const electionName = "jobs"

// app is one pod's application: it campaigns in electionName through its
// node's sidecar for as long as its stream is open, and remembers the last
// event (leader, follower, candidate) and the token it named.
type app struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	event string
	term  uint64
}

// campaign starts node i's app.
func (e *env) campaign(i int) *app {
	ctx, cancel := context.WithCancel(context.Background())
	a := &app{cancel: cancel, done: make(chan struct{})}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.c.Node(i).HTTPURL+"/elections/"+electionName+"/campaign",
		strings.NewReader(`{"value":"`+podName(i)+`:8080"}`))
	resp, err := e.c.HTTPClient().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		e.t.Fatalf("node %d: campaign: %v %v", i, resp, err)
	}
	go func() {
		defer close(a.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				var d struct {
					Term uint64 `json:"term"`
				}
				json.Unmarshal([]byte(v), &d)
				a.mu.Lock()
				a.event, a.term = event, d.Term
				a.mu.Unlock()
			}
		}
		a.mu.Lock()
		a.event = "" // the stream ended: no candidacy
		a.mu.Unlock()
	}()
	return a
}

// close ends the app's campaign, as the example app does on SIGTERM.
func (a *app) close() { a.cancel(); <-a.done }

func (a *app) leads() (bool, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.event == "leader", a.term
}

// namedSettled waits until exactly one app says it leads and the slice
// names its pod alone with its token.
func (e *env) namedSettled(apps map[int]*app, timeout time.Duration) (int, sliceState) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		id, term, n := 0, uint64(0), 0
		for i, a := range apps {
			if ok, t := a.leads(); ok {
				id, term, n = i, t, n+1
			}
		}
		if n == 1 {
			states, _ := e.hist.snapshot()
			if k := len(states); k > 0 && states[k-1].pod() == podName(id) && states[k-1].Term == term {
				return id, states[k-1]
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no settled app leader and slice within %v (%d apps lead, the last %d at %d); history:\n%s", timeout, n, id, term, e.hist.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaderSliceFollowsANamedElection: with --k8s-leader-election the
// Service follows the election the apps campaign in, not the nodes' own:
// it names nobody until an app campaigns, then the pod whose app leads,
// with that election's token and name; when that app closes its campaign
// (the example app's SIGTERM) the slice moves to another app's pod, and
// when a leading app's node is SIGKILLed, to the last one. The history
// never names two pods and the token never goes down.
func TestLeaderSliceFollowsANamedElection(t *testing.T) {
	e := setup(t, 0, "--k8s-leader-election", electionName)
	e.allAnswer(time.Minute) // the default election has a leader
	for _, s := range e.hist.states0() {
		if len(s.Pods) > 0 {
			t.Fatalf("the slice names %v before any app campaigns (it follows the default election?)", s.Pods)
		}
	}
	apps := map[int]*app{1: e.campaign(1)}
	defer func() {
		for _, a := range apps {
			a.close()
		}
	}()
	first, s := e.namedSettled(apps, 30*time.Second)
	es, err := e.admin.DiscoveryV1().EndpointSlices(namespace).Get(context.Background(), service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := es.Annotations[leaderslice.AnnotationElection]; first != 1 || got != electionName {
		t.Fatalf("slice names %s for election %q; want pod-1 for %q", s.pod(), got, electionName)
	}
	for i := 2; i <= nodes; i++ {
		apps[i] = e.campaign(i)
	}
	leader, before := e.namedSettled(apps, 30*time.Second)

	// The leading app closes its campaign: its node hands over.
	t0 := time.Now()
	apps[leader].close()
	delete(apps, leader)
	after := e.moved(leader, before.Term, 30*time.Second)
	t.Logf("the app of %s closed its campaign; the slice names %s (token %d) after %v", podName(leader), after.pod(), after.Term,
		after.At.Sub(t0).Round(time.Millisecond))
	leader, before = e.namedSettled(apps, 30*time.Second)

	// The leading app's node is SIGKILLed: its app's stream breaks, and
	// the last app leads.
	t0 = time.Now()
	if err := e.c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	after = e.moved(leader, before.Term, 30*time.Second)
	t.Logf("node %d SIGKILLed; the slice names %s (token %d) after %v", leader, after.pod(), after.Term, after.At.Sub(t0).Round(time.Millisecond))
	apps[leader].close()
	delete(apps, leader)
	e.namedSettled(apps, 30*time.Second)
	if err := e.c.Start(leader); err != nil {
		t.Fatal(err)
	}
	e.allAnswer(30 * time.Second)
	e.hist.check(t)
	t.Logf("slice history:\n%s", e.hist.String())
}
