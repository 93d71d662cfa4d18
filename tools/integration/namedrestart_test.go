package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNamedElectionNodeQuickRestart: five electord processes, an app
// process campaigning for "jobs" through each. One node is SIGKILLed with
// its app and started again at once (same id, data dir and ports, faster
// than gossip declares it dead), and its app campaigns again. Within the
// deadline every node names the same leader of "jobs" at the same term, at
// most one node says it leads, and that agreement holds. The victim is the
// leader's node, then (a second subtest) a follower's node.
func TestNamedElectionNodeQuickRestart(t *testing.T) {
	for _, victim := range []string{"leader", "follower"} {
		t.Run(victim, func(t *testing.T) {
			forEachAlgorithm(t, func(t *testing.T, alg string) {
				testNamedQuickRestart(t, alg, victim == "leader")
			})
		})
	}
}

// namedRestartAgreement is how long the nodes have to agree on one leader
// of the election after the restarted node's app campaigns again.
const namedRestartAgreement = 5 * time.Second

func testNamedQuickRestart(t *testing.T, alg string, killLeader bool) {
	const nodes = 5
	ps := startProcs(t, nodes, alg)
	waitProcAgreement(t, ps, 30*time.Second, "five processes agree on a default leader", nil)
	apps := make([]*app, nodes)
	for i, p := range ps {
		apps[i] = startApp(t, "grpc", p.api, "jobs", fmt.Sprintf("app-%d", p.id))
		apps[i].await(10*time.Second, "its first event", func(appEvent) bool { return true })
	}
	before := waitNamedAgreement(t, ps, 15*time.Second, "five nodes agree on the leader of jobs")

	var victim *proc
	for _, p := range ps {
		if (uint64(p.id) == before.id) == killLeader {
			victim = p
			break
		}
	}
	i := victim.id - 1
	t.Logf("jobs: node %d leads at term %d; SIGKILL node %d and its app, and restart both", before.id, before.term, victim.id)
	apps[i].kill()
	if err := victim.signal(syscall.SIGKILL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	victim.join = nil
	for _, p := range ps {
		if p != victim {
			victim.join = append(victim.join, p.gossip)
		}
	}
	victim.start()
	eventually(t, 10*time.Second, fmt.Sprintf("restarted node %d serves its sidecar", victim.id), func() (bool, string) {
		resp, err := http.Get("http://" + victim.httpA + "/elections")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	apps[i] = startApp(t, "grpc", victim.api, "jobs", fmt.Sprintf("app-%d", victim.id))
	apps[i].await(10*time.Second, "its first event after the restart", func(appEvent) bool { return true })
	campaigned := time.Now()

	// Until they agree, no two nodes may say they lead at once: the
	// restarted node does not lead alone before it has heard the others.
	var twoLeaders []string
	after := waitNamedAgreementWatching(t, ps, namedRestartAgreement, fmt.Sprintf("after node %d's quick restart, the nodes agree on the leader of jobs", victim.id),
		func(views []namedView, desc string) {
			selves := 0
			for _, v := range views {
				if v.self {
					selves++
				}
			}
			if selves > 1 {
				twoLeaders = append(twoLeaders, desc)
			}
		})
	if len(twoLeaders) > 0 {
		t.Errorf("after node %d's quick restart, two nodes said they lead jobs at once: %v", victim.id, twoLeaders)
	}
	t.Logf("jobs: node %d leads at term %d, agreed %v after the restarted app campaigned", after.id, after.term,
		time.Since(campaigned).Round(time.Millisecond))
	switch {
	case killLeader && (after.term <= before.term):
		t.Errorf("after its leader's restart jobs is led at term %d, not above %d", after.term, before.term)
	case !killLeader && after != before:
		// A follower's restart must not depose the leader (sticky, as
		// the default election): it waits for the others' word.
		t.Errorf("a follower's restart moved jobs from node %d at term %d to node %d at term %d",
			before.id, before.term, after.id, after.term)
	}
	// And it holds: the restarted node is not left leading on its own once
	// gossip and the peer connections settle.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(pollInterval) {
		views, desc := namedViews(ps)
		if v, ok := namedAgreement(views); !ok || v != after {
			t.Fatalf("the agreement on node %d at term %d did not hold: %s", after.id, after.term, desc)
		}
	}
}

// namedView is one node's answer to GET /elections/{name}/leader.
type namedView struct {
	code int
	id   uint64
	term uint64
	self bool
}

// namedViews asks every node of ps who leads "jobs".
func namedViews(ps []*proc) ([]namedView, string) {
	var b strings.Builder
	views := make([]namedView, len(ps))
	for i, p := range ps {
		v, err := namedLeaderView(p.httpA, "jobs")
		views[i] = v
		if err != nil {
			fmt.Fprintf(&b, "%d:error(%v) ", p.id, err)
			continue
		}
		fmt.Fprintf(&b, "%d:%d@%d", p.id, v.id, v.term)
		if v.self {
			b.WriteString("/self")
		}
		b.WriteString(" ")
	}
	return views, b.String()
}

func namedLeaderView(httpAddr, name string) (namedView, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + httpAddr + "/elections/" + name + "/leader")
	if err != nil {
		return namedView{}, err
	}
	defer resp.Body.Close()
	var d struct {
		ID   uint64 `json:"id"`
		Term uint64 `json:"term"`
		Self bool   `json:"self"`
	}
	err = json.NewDecoder(resp.Body).Decode(&d)
	return namedView{code: resp.StatusCode, id: d.ID, term: d.Term, self: d.Self}, err
}

// namedAgreement: every node names one leader at one term, and only the
// leader's node says it leads.
func namedAgreement(views []namedView) (namedView, bool) {
	first := views[0]
	selves := 0
	for _, v := range views {
		if v.code != http.StatusOK || v.id == 0 || v.id != first.id || v.term != first.term {
			return first, false
		}
		if v.self {
			selves++
		}
	}
	first.self = false
	return first, selves == 1
}

// waitNamedAgreement waits until the nodes of ps agree on the leader of
// "jobs", and returns it (self false).
func waitNamedAgreement(t *testing.T, ps []*proc, timeout time.Duration, what string) namedView {
	t.Helper()
	return waitNamedAgreementWatching(t, ps, timeout, what, nil)
}

// waitNamedAgreementWatching is waitNamedAgreement that shows watch (if
// not nil) every set of views it polls.
func waitNamedAgreementWatching(t *testing.T, ps []*proc, timeout time.Duration, what string, watch func([]namedView, string)) namedView {
	t.Helper()
	var agreed namedView
	eventually(t, timeout, what, func() (bool, string) {
		views, desc := namedViews(ps)
		if watch != nil {
			watch(views, desc)
		}
		v, ok := namedAgreement(views)
		agreed = v
		return ok, desc
	})
	return agreed
}
