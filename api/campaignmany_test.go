package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// manyEvent is one event of a many-election stream, either transport.
type manyEvent struct {
	event, election string
	id, term        uint64
}

// manyState follows a many-election stream: the first and the newest
// event of each election.
type manyState struct {
	t           *testing.T
	evs         chan manyEvent
	first, last map[string]manyEvent
}

func newManyState(t *testing.T) *manyState {
	return &manyState{t: t, evs: make(chan manyEvent, 1024), first: map[string]manyEvent{}, last: map[string]manyEvent{}}
}

// until reads events until ok holds of the newest of each election.
func (m *manyState) until(d time.Duration, what string, ok func(map[string]manyEvent) bool) {
	m.t.Helper()
	deadline := time.After(d)
	for !ok(m.last) {
		select {
		case ev, open := <-m.evs:
			if !open {
				m.t.Fatalf("stream ended before: %s", what)
			}
			if _, ok := m.first[ev.election]; !ok {
				m.first[ev.election] = ev
			}
			m.last[ev.election] = ev
		case <-deadline:
			kinds := map[string]int{}
			for _, ev := range m.last {
				kinds[fmt.Sprintf("%s/%d", ev.event, ev.id)]++
			}
			m.t.Fatalf("not within %v: %s (%d elections heard; newest events: %v)", d, what, len(m.last), kinds)
		}
	}
}

// every: all k elections' newest event is event, with leader id.
func every(k int, event string, id uint64) func(map[string]manyEvent) bool {
	return func(last map[string]manyEvent) bool {
		if len(last) < k {
			return false
		}
		for _, ev := range last {
			if ev.event != event || ev.id != id {
				return false
			}
		}
		return true
	}
}

func shardNames(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("shard-%d", i)
	}
	return out
}

// campaignSSE opens POST /elections/campaign with body; the returned
// cancel ends the stream. A refusal is returned as its status and error.
func campaignSSE(t *testing.T, d *daemon.Daemon, body any) (*manyState, int, string, context.CancelFunc) {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.HTTPAddr+"/elections/campaign", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, e.Error, nil
	}
	m := newManyState(t)
	go func() {
		defer resp.Body.Close()
		defer close(m.evs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				var data struct {
					ID       uint64 `json:"id"`
					Term     uint64 `json:"term"`
					Election string `json:"election"`
				}
				if err := json.Unmarshal([]byte(line[len("data: "):]), &data); err != nil {
					t.Errorf("data %q: %v", line, err)
					return
				}
				m.evs <- manyEvent{event: event, election: data.Election, id: data.ID, term: data.Term}
			}
		}
	}()
	return m, http.StatusOK, "", cancel
}

func campaignGRPC(t *testing.T, d *daemon.Daemon, req *electordv1.CampaignManyRequest) (*manyState, error, context.CancelFunc) {
	t.Helper()
	conn, err := grpc.NewClient(d.APIAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	s, err := electordv1.NewElectorClient(conn).CampaignMany(ctx, req)
	if err != nil {
		cancel()
		return nil, err, nil
	}
	first, err := s.Recv()
	if err != nil {
		cancel()
		return nil, err, nil
	}
	m := newManyState(t)
	go func() {
		defer close(m.evs)
		var seq uint64
		for p := first; ; {
			for _, ev := range p.GetEvents() {
				if ev.GetSeq() != seq+1 {
					t.Errorf("seq %d after %d", ev.GetSeq(), seq)
				}
				seq = ev.GetSeq()
				m.evs <- manyEvent{event: ev.GetEvent(), election: ev.GetLeader().GetElection(), id: ev.GetLeader().GetId(), term: ev.GetLeader().GetTerm()}
			}
			if p, err = s.Recv(); err != nil {
				return
			}
		}
	}()
	return m, nil, cancel
}

// One app campaigns for many elections over the sidecar, another over
// gRPC on another node: every election's events come on each stream,
// named; when the leading stream ends every election is handed over.
func TestCampaignManyOneStreamManyElections(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Nodes: 2, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	a, b := c.Nodes[0], c.Nodes[1]
	const k = 50
	names := shardNames(k)
	sa, code, msg, stopA := campaignSSE(t, a, map[string]any{"elections": names, "value": "app-a", "placement": "sticky"})
	if code != http.StatusOK {
		t.Fatalf("sidecar campaign: %d %s", code, msg)
	}
	defer stopA()
	// Each election's stream opens with its candidate event, unless the
	// lone candidate led before the stream took it: a stream carries each
	// election's newest state, not every step to it.
	aID := uint64(a.Node.Self())
	sa.until(20*time.Second, "a leads every election", every(k, "leader", aID))
	for name, ev := range sa.first {
		if !(ev.event == "candidate" && ev.id == 0) && !(ev.event == "leader" && ev.id == aID) {
			t.Errorf("%s: a's first event is %s (leader %d), want candidate or a's leadership", name, ev.event, ev.id)
		}
	}
	sb, err, stopB := campaignGRPC(t, b, &electordv1.CampaignManyRequest{Elections: names, Value: "app-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	// b follows a in every election (sticky: a keeps them), or, where a
	// blip on a loaded host moved one (plain mode allows it), leads it.
	sb.until(20*time.Second, "b follows a (or leads) in every election", func(last map[string]manyEvent) bool {
		if len(last) < k {
			return false
		}
		for _, ev := range last {
			if !(ev.event == "follower" && ev.id == aID) && !(ev.event == "leader" && ev.id == uint64(b.Node.Self())) {
				return false
			}
		}
		return true
	})

	stopA() // a's app goes away: every candidacy of its stream ends
	bID := uint64(b.Node.Self())
	sb.until(20*time.Second, "b leads every election after a's stream ended", every(k, "leader", bID))
	for name, ev := range sb.last {
		if ev.term <= sa.last[name].term {
			t.Fatalf("%s: b leads at term %d, a led at %d", name, ev.term, sa.last[name].term)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		els := a.Node.NamedElections()
		local := 0
		for _, e := range els {
			local += e.Local
		}
		if local == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a still holds %d local candidacies after its stream ended", local)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopB()
}

// A bad list is refused before anything stands, naming the offender; the
// single campaign's placement is checked as well.
func TestCampaignManyRefusesBadInput(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Nodes: 1, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	d := c.Nodes[0]
	dup := shardNames(4)
	dup[3] = "shard-1"
	bad := shardNames(3)
	bad[2] = "shard 2"
	cases := []struct {
		name      string
		elections []string
		placement string
		want      string
	}{
		{"duplicate", dup, "", `elections[3] "shard-1": listed twice (first at elections[1])`},
		{"invalid name", bad, "", `elections[2] "shard 2"`},
		{"none", nil, "", "no elections"},
		{"too many", make([]string, node.MaxCampaignElections+1), "", fmt.Sprintf("more than %d elections", node.MaxCampaignElections)},
		{"placement", shardNames(2), "nearest", `placement "nearest"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, code, msg, _ := campaignSSE(t, d, map[string]any{"elections": tc.elections, "value": "v", "placement": tc.placement})
			if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("sidecar: %d %s, want 400 naming %s", code, msg, tc.want)
			}
			_, err, _ := campaignGRPC(t, d, &electordv1.CampaignManyRequest{Elections: tc.elections, Value: "v", Placement: tc.placement})
			if grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("gRPC: %v, want InvalidArgument naming %s", err, tc.want)
			}
		})
	}
	if els := d.Node.NamedElections(); len(els) != 0 {
		t.Fatalf("refused campaigns left %d elections", len(els))
	}
	// The single campaign takes a placement too, checked.
	resp, err := http.Post("http://"+d.HTTPAddr+"/elections/jobs/campaign", "application/json", strings.NewReader(`{"value":"v","placement":"nearest"}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), `placement \"nearest\"`) {
		t.Errorf("single campaign with a bad placement: %d %s", resp.StatusCode, msg)
	}
}
