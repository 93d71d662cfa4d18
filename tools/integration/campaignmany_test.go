package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// appMany is an app holding one stream for count elections, shard-0 to
// shard-<count-1>, with the Go client's CampaignMany; each event is a line
// "<event> <id> <term> <election>".
func appMany(addr, count, value string) error {
	k, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	c, err := client.New(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	cs, err := c.CampaignMany(context.Background(), shardNames(k), value)
	if err != nil {
		return err
	}
	for ev := range cs.Events() {
		fmt.Printf("%s%s %d %d %s\n", appLinePref, ev.Event, ev.Leader.ID, ev.Leader.Term, ev.Election)
	}
	return fmt.Errorf("candidacies ended: %w", cs.Err())
}

func shardNames(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("shard-%d", i)
	}
	return out
}

// startManyApp starts an app campaigning for k elections on one stream;
// its events carry the election in value.
func startManyApp(t *testing.T, addr string, k int, value string) *app {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=many %s %d %s", appEnv, addr, k, value))
	return runLines(t, value, cmd, func(line string) (appEvent, bool) {
		var ev appEvent
		line, ok := strings.CutPrefix(line, appLinePref)
		if !ok {
			return ev, false
		}
		_, err := fmt.Sscanf(line, "%s %d %d %s", &ev.event, &ev.id, &ev.term, &ev.value)
		return ev, err == nil
	})
}

// awaitAll reads a's events until every one of k elections' newest says
// event with leader id; it returns the newest of each.
func (a *app) awaitAll(d time.Duration, k int, event string, id uint64) map[string]appEvent {
	a.t.Helper()
	last := map[string]appEvent{}
	deadline := time.After(d)
	for {
		done := len(last) == k
		for _, ev := range last {
			done = done && ev.event == event && ev.id == id
		}
		if done {
			return last
		}
		select {
		case ev, open := <-a.events:
			if !open {
				a.t.Fatalf("app %s: its stream ended waiting for %s everywhere", a.name, event)
			}
			last[ev.value] = ev
		case <-deadline:
			a.t.Fatalf("app %s: not %s of node %d in all %d elections within %v (%d heard)", a.name, event, id, k, d, len(last))
		}
	}
}

// One app process holds one stream for 100 elections on a 3-node cluster;
// it is SIGKILLed: every election gets a new leader, the other app's.
func TestCampaignManyAppKilled(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		const k = 100
		ps := startProcs(t, 3, alg)
		waitProcAgreement(t, ps, 30*time.Second, "three processes agree on a leader", nil)
		appA := startManyApp(t, ps[0].api, k, "app-a")
		ledA := appA.awaitAll(20*time.Second, k, "leader", 1)
		appB := startManyApp(t, ps[1].api, k, "app-b")
		appB.awaitAll(20*time.Second, k, "follower", 1)

		t0 := time.Now()
		appA.kill()
		ledB := appB.awaitAll(20*time.Second, k, "leader", 2)
		t.Logf("%s: app-a (%d elections on one stream) SIGKILLed: app-b leads all %d, %v after the signal", alg, k, k, time.Since(t0).Round(time.Millisecond))
		for name, ev := range ledB {
			if ev.term <= ledA[name].term {
				t.Fatalf("%s: app-b leads at term %d, app-a led at %d", name, ev.term, ledA[name].term)
			}
		}
		eventually(t, 10*time.Second, "node 3 shows app-b leading all", func() (bool, string) {
			els, err := ps[2].cl.ListElections(context.Background())
			if err != nil {
				return false, err.Error()
			}
			led := 0
			for _, e := range els {
				if e.Leader.ID == 2 {
					led++
				}
			}
			return led == k, fmt.Sprintf("%d of %d led by node 2", led, len(els))
		})
	})
}
