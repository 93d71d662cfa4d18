package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Quorum mode: every node votes in a named election (the third node has no
// app, a voter), and the leading app's SIGKILL still hands the leadership
// to the other app at once, seen by the voter.
func TestNamedElectionAppKilledQuorum(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		ps := startProcsWith(t, 3, alg, []string{"--quorum", "3"})
		waitProcAgreement(t, ps, 30*time.Second, "three processes agree on a leader", nil)

		app1 := startApp(t, "http", ps[0].httpA, "jobs", "app-1:8080")
		led := app1.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
		if led.id != 1 || led.term == 0 {
			t.Fatalf("app-1 leads as %+v", led)
		}
		app2 := startApp(t, "grpc", ps[1].api, "jobs", "app-2:8080")
		app2.await(10*time.Second, "follower of app-1", func(ev appEvent) bool {
			return ev.event == "follower" && ev.id == 1 && ev.value == "app-1:8080"
		})
		eventually(t, 10*time.Second, "the voter, node 3, shows app-1", func() (bool, string) {
			code, id, term, value, err := electionLeader(ps[2].httpA, "jobs")
			return code == http.StatusOK && id == 1 && term == led.term && value == "app-1:8080", fmt.Sprint(code, id, term, value, err)
		})

		t0 := time.Now()
		app1.kill()
		won := app2.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
		took := time.Since(t0)
		if won.id != 2 || won.value != "app-2:8080" || won.term <= led.term {
			t.Fatalf("after app-1's kill app-2 sees %+v (app-1 led at %d)", won, led.term)
		}
		t.Logf("quorum 3: app-1 SIGKILLed: app-2 read that it leads, at term %d, %v after the signal", won.term, took.Round(100*time.Microsecond))
		eventually(t, 10*time.Second, "the voter, node 3, shows app-2", func() (bool, string) {
			code, id, term, value, err := electionLeader(ps[2].httpA, "jobs")
			return code == http.StatusOK && id == 2 && term == won.term && value == "app-2:8080", fmt.Sprint(code, id, term, value, err)
		})
		for i, want := range []int{http.StatusServiceUnavailable, http.StatusOK, http.StatusServiceUnavailable} {
			if code := selfCode(t, ps[i].httpA, "jobs"); code != want {
				t.Errorf("node %d: /elections/jobs/leader/self answers %d, want %d", ps[i].id, code, want)
			}
		}
	})
}
