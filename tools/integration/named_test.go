package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/electord/electord/client"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// An app is a real process that campaigns through its node and prints each
// event it gets as one line, "<event> <id> <term> <value>". It is this test
// binary run again with appEnv set (see TestMain): killing it is what
// killing a real app does to its stream.
const (
	appEnv      = "ELECTORD_INTEGRATION_APP" // "http <http-addr> <election> <value>" or "grpc <api-addr> <election> <value>"
	appLinePref = "EVENT "
)

// runApp is the app's main: it campaigns until it is killed or its stream
// ends.
func runApp(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 4 {
		fmt.Fprintln(os.Stderr, "app: bad spec", spec)
		return 2
	}
	mode, addr, name, value := f[0], f[1], f[2], f[3]
	var err error
	switch mode {
	case "http":
		err = appHTTP(addr, name, value)
	case "grpc":
		err = appGRPC(addr, name, value)
	case "many":
		err = appMany(addr, name, value)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	fmt.Fprintln(os.Stderr, "app:", err)
	return 1
}

func appHTTP(addr, name, value string) error {
	body, _ := json.Marshal(map[string]any{"value": value, "priority": 0})
	resp, err := http.Post("http://"+addr+"/elections/"+name+"/campaign", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("campaign: %s: %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d struct {
				ID    uint64 `json:"id"`
				Term  uint64 `json:"term"`
				Value string `json:"value"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				return err
			}
			fmt.Printf("%s%s %d %d %s\n", appLinePref, event, d.ID, d.Term, d.Value)
		}
	}
	return fmt.Errorf("stream ended: %v", sc.Err())
}

// appGRPC campaigns with the Go client (Elector.Campaign underneath).
func appGRPC(addr, name, value string) error {
	c, err := client.New(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	cp, err := c.Campaign(context.Background(), name, value)
	if err != nil {
		return err
	}
	for ev := range cp.Events() {
		fmt.Printf("%s%s %d %d %s\n", appLinePref, ev.Event, ev.Leader.ID, ev.Leader.Term, ev.Leader.Value)
	}
	return fmt.Errorf("candidacy ended: %w", cp.Err())
}

// appEvent is one line an app printed.
type appEvent struct {
	event string
	id    uint64
	term  uint64
	value string
}

// app is a running app process.
type app struct {
	t      *testing.T
	cmd    *exec.Cmd
	events chan appEvent
	name   string
}

func startApp(t *testing.T, mode, addr, election, value string) *app {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s", appEnv, mode, addr, election, value))
	return runLines(t, value, cmd, func(line string) (appEvent, bool) {
		var ev appEvent
		line, ok := strings.CutPrefix(line, appLinePref)
		if !ok {
			return ev, false
		}
		if _, err := fmt.Sscanf(line, "%s %d %d %s", &ev.event, &ev.id, &ev.term, &ev.value); err != nil {
			// No value (no leader): three fields.
			fmt.Sscanf(line, "%s %d %d", &ev.event, &ev.id, &ev.term)
		}
		return ev, true
	})
}

// runLines starts cmd, an app, and turns each line it prints into an event
// with parse (false: not an event).
func runLines(t *testing.T, name string, cmd *exec.Cmd, parse func(string) (appEvent, bool)) *app {
	t.Helper()
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &app{t: t, cmd: cmd, events: make(chan appEvent, 64), name: name}
	go func() {
		defer close(a.events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ev, ok := parse(sc.Text()); ok {
				a.events <- ev
			}
		}
	}()
	t.Cleanup(func() { a.kill() })
	return a
}

// kill SIGKILLs the app and reaps it.
func (a *app) kill() {
	if a.cmd == nil || a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
}

// await waits for an event that satisfies ok.
func (a *app) await(d time.Duration, what string, ok func(appEvent) bool) appEvent {
	a.t.Helper()
	deadline := time.After(d)
	var seen []appEvent
	for {
		select {
		case ev, open := <-a.events:
			if !open {
				a.t.Fatalf("app %s: its stream ended waiting for %s; saw %v", a.name, what, seen)
			}
			seen = append(seen, ev)
			if ok(ev) {
				return ev
			}
		case <-deadline:
			a.t.Fatalf("app %s: no %s within %v; saw %v", a.name, what, d, seen)
		}
	}
}

// electionLeader is GET /elections/{name}/leader on a node's sidecar.
func electionLeader(httpAddr, name string) (code int, id, term uint64, value string, err error) {
	resp, err := http.Get("http://" + httpAddr + "/elections/" + name + "/leader")
	if err != nil {
		return 0, 0, 0, "", err
	}
	defer resp.Body.Close()
	var d struct {
		ID       uint64 `json:"id"`
		Term     uint64 `json:"term"`
		Value    string `json:"value"`
		Election string `json:"election"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return resp.StatusCode, 0, 0, "", err
	}
	return resp.StatusCode, d.ID, d.Term, d.Value, nil
}

// watchElectionSSE follows GET /elections/{name}/watch on a node's
// sidecar; its events come as an app's do (event "leader").
func watchElectionSSE(t *testing.T, httpAddr, name string) *app {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/elections/"+name+"/watch", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	w := &app{t: t, events: make(chan appEvent, 64), name: "watch of " + name}
	go func() {
		defer close(w.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var d struct {
				ID    uint64 `json:"id"`
				Term  uint64 `json:"term"`
				Value string `json:"value"`
			}
			if json.Unmarshal([]byte(data), &d) == nil {
				w.events <- appEvent{event: "leader", id: d.ID, term: d.Term, value: d.Value}
			}
		}
	}()
	return w
}

// selfCode is the status of GET /elections/{name}/leader/self.
func selfCode(t *testing.T, httpAddr, name string) int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/elections/" + name + "/leader/self")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestNamedElectionAppKilled: three nodes; app-1 campaigns for "jobs"
// through node 1's sidecar and leads, app-2 through node 2's gRPC API and
// follows; node 3, with no candidate, shows app-1 as the leader. app-1's
// process is SIGKILLed: app-2 leads at a higher token, and node 3 shows it,
// while the default election keeps its leader.
func TestNamedElectionAppKilled(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		ps := startProcs(t, 3, alg)
		def := waitProcAgreement(t, ps, 30*time.Second, "three processes agree on a leader", nil)

		watch := watchElectionSSE(t, ps[2].httpA, "jobs")
		octx, ocancel := context.WithCancel(context.Background())
		defer ocancel()
		observe := ps[2].cl.Observe(octx, "jobs")
		app1 := startApp(t, "http", ps[0].httpA, "jobs", "app-1:8080")
		led := app1.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
		if led.id != 1 || led.value != "app-1:8080" || led.term == 0 {
			t.Fatalf("app-1 leads as %+v", led)
		}
		app2 := startApp(t, "grpc", ps[1].api, "jobs", "app-2:8080")
		app2.await(10*time.Second, "follower of app-1", func(ev appEvent) bool {
			return ev.event == "follower" && ev.id == 1 && ev.value == "app-1:8080"
		})
		eventually(t, 10*time.Second, "node 3 shows app-1", func() (bool, string) {
			code, id, term, value, err := electionLeader(ps[2].httpA, "jobs")
			return code == http.StatusOK && id == 1 && term == led.term && value == "app-1:8080", fmt.Sprint(code, id, term, value, err)
		})
		if code, _, _, _, _ := electionLeader(ps[2].httpA, "other"); code != http.StatusServiceUnavailable {
			t.Errorf("an election nobody campaigns in answers %d, want 503", code)
		}
		for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable, http.StatusServiceUnavailable} {
			if code := selfCode(t, ps[i].httpA, "jobs"); code != want {
				t.Errorf("node %d: /elections/jobs/leader/self answers %d, want %d", ps[i].id, code, want)
			}
		}

		t0 := time.Now() // before the signal: kill returns once the app is reaped, and app-2 may lead by then
		app1.kill()
		won := app2.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
		took := time.Since(t0)
		if won.id != 2 || won.value != "app-2:8080" || won.term <= led.term {
			t.Fatalf("after app-1's kill app-2 sees %+v (app-1 led at %d)", won, led.term)
		}
		t.Logf("app-1 SIGKILLed: app-2 read that it leads, at term %d, %v after the signal", won.term, took.Round(100*time.Microsecond))
		if code := selfCode(t, ps[1].httpA, "jobs"); code != http.StatusOK {
			t.Errorf("node 2: /elections/jobs/leader/self answers %d after app-2 leads, want 200", code)
		}
		eventually(t, 10*time.Second, "node 3 shows app-2", func() (bool, string) {
			code, id, term, value, err := electionLeader(ps[2].httpA, "jobs")
			return code == http.StatusOK && id == 2 && term == won.term && value == "app-2:8080", fmt.Sprint(code, id, term, value, err)
		})

		watch.await(10*time.Second, "node 3's watch shows app-1", func(ev appEvent) bool { return ev.id == 1 && ev.term == led.term })
		watch.await(10*time.Second, "node 3's watch shows app-2", func(ev appEvent) bool {
			return ev.id == 2 && ev.term == won.term && ev.value == "app-2:8080"
		})

		for seen := false; !seen; {
			select {
			case ev := <-observe:
				if ev.Err == nil && ev.Leader.ID == 2 && uint64(ev.Leader.Term) == won.term {
					if ev.Leader.Value != "app-2:8080" || ev.Leader.Election != "jobs" {
						t.Errorf("the Go client's Observe shows %+v", ev.Leader)
					}
					seen = true
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the Go client's Observe on node 3 never showed app-2 leading")
			}
		}

		// The leading app's node proclaims a new value: node 3 shows it at
		// the same term.
		resp, err := http.Post("http://"+ps[1].httpA+"/elections/jobs/proclaim", "application/json", strings.NewReader(`{"value":"app-2:9090"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("proclaim: %s", resp.Status)
		}
		eventually(t, 10*time.Second, "node 3 shows the proclaimed value", func() (bool, string) {
			code, id, term, value, err := electionLeader(ps[2].httpA, "jobs")
			return code == http.StatusOK && id == 2 && term == won.term && value == "app-2:9090", fmt.Sprint(code, id, term, value, err)
		})

		cc, err := grpc.NewClient(ps[2].api, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		list, err := electordv1.NewElectorClient(cc).ListElections(ctx, &electordv1.ListElectionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if els := list.GetElections(); len(els) != 1 || els[0].GetElection() != "jobs" || els[0].GetLeader().GetId() != 2 || els[0].GetCandidates() != 1 {
			t.Errorf("node 3 lists %v", els)
		}
		waitProcAgreement(t, ps, 10*time.Second, "the default election keeps its leader", func(li client.LeaderInfo) bool {
			return li.ID == def.ID && li.Term == def.Term
		})
	})
}

// TestElectctlElect is the tour's two terminals: electctl elect jobs
// app-1:8080 against node 1 and app-2:8080 against node 2; the first is
// killed, the second leads; electctl elections on node 3 lists it. Then a
// third app on node 3: electctl transfer --election sent to node 1 (which
// no longer stands) is forwarded to node 2 and hands jobs to node 3;
// electctl proclaim on node 3 changes the value node 1 shows, with the
// leadership's start as node 3 said it.
func TestElectctlElect(t *testing.T) {
	ps := startProcs(t, 3, "bully")
	waitProcAgreement(t, ps, 30*time.Second, "three processes agree on a leader", nil)
	elect := func(p *proc, value string) *app {
		cmd := exec.Command(electctlBin, "--endpoints", p.api, "-o", "json", "elect", "jobs", value)
		return runLines(t, value, cmd, func(line string) (appEvent, bool) {
			var d struct {
				Event string `json:"event"`
				ID    uint64 `json:"id"`
				Term  uint64 `json:"term"`
				Value string `json:"value"`
			}
			if json.Unmarshal([]byte(line), &d) != nil {
				return appEvent{}, false
			}
			return appEvent{event: d.Event, id: d.ID, term: d.Term, value: d.Value}, true
		})
	}
	one := elect(ps[0], "app-1:8080")
	led := one.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
	two := elect(ps[1], "app-2:8080")
	two.await(10*time.Second, "follower of app-1", func(ev appEvent) bool { return ev.event == "follower" && ev.value == "app-1:8080" })
	one.kill()
	won := two.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
	if won.term <= led.term || won.value != "app-2:8080" {
		t.Fatalf("after the first electctl's kill: %+v (it led at %d)", won, led.term)
	}
	eventually(t, 10*time.Second, "electctl elections on node 3 lists jobs led by app-2", func() (bool, string) {
		r := electctl(t, "--endpoints", ps[2].api, "elections")
		return r.code == exitOK && strings.Contains(r.stdout, "jobs") && strings.Contains(r.stdout, "app-2:8080"), r.stdout + r.stderr
	})
	r := electctl(t, "--endpoints", ps[2].api, "-o", "json", "leader", "--election", "jobs")
	if r.code != exitOK || !strings.Contains(r.stdout, `"value": "app-2:8080"`) {
		t.Errorf("electctl leader --election jobs: %v", r)
	}

	three := elect(ps[2], "app-3:8080")
	three.await(10*time.Second, "follower of app-2", func(ev appEvent) bool { return ev.event == "follower" && ev.value == "app-2:8080" })
	if r := electctl(t, "--endpoints", ps[0].api, "transfer", "--election", "jobs", "1"); r.code != exitFailedPrecondition ||
		!strings.Contains(r.stderr, "node 1 does not stand in jobs") {
		t.Errorf("transfer --election jobs to node 1, which does not stand: %v", r)
	}
	r = electctl(t, "--endpoints", ps[0].api, "transfer", "--election", "jobs", "3")
	if r.code != exitOK || !strings.Contains(r.stdout, "node 2 handed the leadership of jobs to node 3") {
		t.Fatalf("transfer --election jobs 3 through node 1: %v", r)
	}
	took := three.await(10*time.Second, "leader", func(ev appEvent) bool { return ev.event == "leader" })
	if took.term <= won.term || took.id != 3 {
		t.Fatalf("after the transfer: %+v (app-2 led at %d)", took, won.term)
	}
	two.await(10*time.Second, "follower of app-3", func(ev appEvent) bool { return ev.event == "follower" && ev.value == "app-3:8080" })
	if r := electctl(t, "--endpoints", ps[2].api, "proclaim", "jobs", "app-3:9090"); r.code != exitOK {
		t.Fatalf("proclaim: %v", r)
	}
	var seen client.LeaderInfo
	eventually(t, 10*time.Second, "node 1, an observer, shows app-3:9090 with the leadership's start", func() (bool, string) {
		r := electctl(t, "--endpoints", ps[0].api, "-o", "json", "leader", "--election", "jobs")
		seen = client.LeaderInfo{}
		_ = json.Unmarshal([]byte(r.stdout), &seen)
		return seen.ID == 3 && seen.Value == "app-3:9090" && !seen.Since.IsZero(), r.stdout + r.stderr
	})
	if d := time.Since(seen.Since); d < 0 || d > time.Minute {
		t.Errorf("node 1 shows the leadership began %v ago", d)
	}
}

// TestNamedElectionsNodeKilled: node 1 leads many named elections (its
// candidacies came first), node 2 stands in every one of them, node 3 has
// no candidate. Node 1's process is SIGKILLed: every election gets node 2
// as its leader at a higher token, as node 2's campaign streams and node
// 3's view show it. The elections fail over together (one loop pass, one
// synced write, one Batch call per peer), not one after the other.
func TestNamedElectionsNodeKilled(t *testing.T) {
	const elections = 40
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		ps := startProcs(t, 3, alg)
		waitProcAgreement(t, ps, 30*time.Second, "three processes agree on a leader", nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		names := make([]string, elections)
		led := map[string]uint64{}
		for i := range names {
			names[i] = fmt.Sprintf("jobs-%03d", i)
			cp, err := ps[0].cl.Campaign(ctx, names[i], "app-1")
			if err != nil {
				t.Fatal(err)
			}
			ev := awaitCampaign(t, cp, names[i], "node 1 leads", func(ev client.CampaignEvent) bool { return ev.Event == "leader" })
			led[names[i]] = uint64(ev.Leader.Term)
		}
		standing := map[string]*client.Campaign{}
		for _, name := range names {
			cp, err := ps[1].cl.Campaign(ctx, name, "app-2")
			if err != nil {
				t.Fatal(err)
			}
			awaitCampaign(t, cp, name, "node 2 follows node 1", func(ev client.CampaignEvent) bool {
				return ev.Event == "follower" && ev.Leader.ID == 1
			})
			standing[name] = cp
		}
		eventually(t, 10*time.Second, "node 3 shows node 1 leading every election", func() (bool, string) {
			for _, name := range names {
				li, err := ps[2].cl.ElectionLeader(ctx, name)
				if err != nil || li.ID != 1 || uint64(li.Term) != led[name] {
					return false, fmt.Sprint(name, li, err)
				}
			}
			return true, ""
		})

		t0 := time.Now()
		if err := ps[0].signal(syscall.SIGKILL, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		won := map[string]uint64{}
		var last time.Duration
		for _, name := range names {
			ev := awaitCampaign(t, standing[name], name, "node 2 leads", func(ev client.CampaignEvent) bool {
				return ev.Event == "leader" && uint64(ev.Leader.Term) > led[name]
			})
			won[name] = uint64(ev.Leader.Term)
			last = max(last, time.Since(t0))
		}
		t.Logf("node 1 SIGKILLed while leading %d elections: node 2 read that it leads the last of them %v after the signal",
			elections, last.Round(100*time.Microsecond))
		eventually(t, 10*time.Second, "node 3 shows node 2 leading every election", func() (bool, string) {
			for _, name := range names {
				li, err := ps[2].cl.ElectionLeader(ctx, name)
				if err != nil || li.ID != 2 || uint64(li.Term) != won[name] || li.Value != "app-2" {
					return false, fmt.Sprint(name, li, err)
				}
			}
			return true, ""
		})
	})
}

// awaitCampaign waits for an event of cp that satisfies ok.
func awaitCampaign(t *testing.T, cp *client.Campaign, name, what string, ok func(client.CampaignEvent) bool) client.CampaignEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var seen []client.CampaignEvent
	for {
		select {
		case ev, open := <-cp.Events():
			if !open {
				t.Fatalf("%s: the campaign ended waiting for %s (%v); saw %v", name, what, cp.Err(), seen)
			}
			seen = append(seen, ev)
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s: no %s within 10s; saw %v", name, what, seen)
		}
	}
}
