package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// TestSidecarHTTP checks the sidecar endpoints of a real cluster: /leader,
// /leader/self, /, /healthz and /watch; and /leader with no leader.
func TestSidecarHTTP(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 3, Algorithm: alg})
		l := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		leader := nodeByID(t, c, l.ID)
		fol := without(c.Nodes, l.ID)[0]

		// GET /leader on a follower: 200, the documented fields, the leader.
		code, body := httpGet(t, "http://"+fol.HTTPAddr+"/leader")
		if code != http.StatusOK {
			t.Fatalf("GET /leader on follower %d: %d %s", fol.Config.ID, code, body)
		}
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatalf("GET /leader: %v: %s", err, body)
		}
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := []string{"address", "id", "name", "self", "since", "state", "term", "term_epoch_slot"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("GET /leader fields %v, want %v", keys, want)
		}
		var li node.LeaderInfo
		if err := json.Unmarshal(body, &li); err != nil {
			t.Fatalf("GET /leader: %v: %s", err, body)
		}
		if li.ID != l.ID || li.Term != l.Term || li.Name != leader.Config.Name || li.Address != leader.APIAddr ||
			li.Self || li.State != node.StateFollower || li.Since.IsZero() {
			t.Errorf("GET /leader on follower %d = %s; want leader %d (%s at %s) in term %v, self false, state follower, since set",
				fol.Config.ID, body, l.ID, leader.Config.Name, leader.APIAddr, l.Term)
		}

		// /leader/self: 200 on the leader, 503 on a follower.
		for _, d := range c.Nodes {
			code, body := httpGet(t, "http://"+d.HTTPAddr+"/leader/self")
			want := http.StatusServiceUnavailable
			if election.NodeID(d.Config.ID) == l.ID {
				want = http.StatusOK
			}
			var sb struct {
				Self  bool          `json:"self"`
				State string        `json:"state"`
				Term  election.Term `json:"term"`
			}
			if err := json.Unmarshal(body, &sb); err != nil || code != want || sb.Self != (want == http.StatusOK) || sb.Term != l.Term {
				t.Errorf("GET /leader/self on node %d: %d %s (%v); want %d, self %v, term %v", d.Config.ID, code, body, err, want, want == http.StatusOK, l.Term)
			}
		}

		// GET /: {"name": "<leader name>"} on every node.
		for _, d := range c.Nodes {
			code, body := httpGet(t, "http://"+d.HTTPAddr+"/")
			var got map[string]string
			if err := json.Unmarshal(body, &got); err != nil || code != http.StatusOK || !reflect.DeepEqual(got, map[string]string{"name": leader.Config.Name}) {
				t.Errorf(`GET / on node %d: %d %s (%v); want 200 {"name":%q}`, d.Config.ID, code, body, err, leader.Config.Name)
			}
		}

		// /healthz: 200.
		if code, body := httpGet(t, "http://"+fol.HTTPAddr+"/healthz"); code != http.StatusOK {
			t.Errorf("GET /healthz: %d %s", code, body)
		}

		// /watch: an SSE "leader" event with the /leader JSON arrives.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+fol.HTTPAddr+"/watch", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /watch: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("GET /watch: %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		type sse struct{ event, data string }
		events := make(chan sse, 1)
		go func() {
			defer close(events)
			sc := bufio.NewScanner(resp.Body)
			var ev sse
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "event: "):
					ev.event = strings.TrimPrefix(line, "event: ")
				case strings.HasPrefix(line, "data: "):
					ev.data = strings.TrimPrefix(line, "data: ")
				case line == "" && ev.event != "":
					events <- ev
					return
				}
			}
		}()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("GET /watch: the stream ended before an event")
			}
			var got node.LeaderInfo
			if err := json.Unmarshal([]byte(ev.data), &got); err != nil || ev.event != "leader" || got.ID != l.ID || got.Term != l.Term {
				t.Errorf("GET /watch: event %q data %s (%v); want a leader event for node %d in term %v", ev.event, ev.data, err, l.ID, l.Term)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("GET /watch: no event within 5s")
		}
	})
}

// TestSidecarHTTPNoLeader: a one-node cluster whose node is killed answers
// GET /leader with 503 {"state":"no_leader","term":N}.
func TestSidecarHTTPNoLeader(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 1, Algorithm: alg})
		l := waitAgreement(t, c.Nodes, 10*time.Second, "the single node leads")
		d := c.Nodes[0]
		if code, body := httpGet(t, "http://"+d.HTTPAddr+"/leader/self"); code != http.StatusOK {
			t.Fatalf("GET /leader/self on the single leading node: %d %s", code, body)
		}
		if err := d.Node.Kill(ctxTimeout(t, 5*time.Second)); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		code, body := httpGet(t, "http://"+d.HTTPAddr+"/leader")
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("GET /leader: %v: %s", err, body)
		}
		want := map[string]any{"state": "no_leader", "term": float64(l.Term), "term_epoch_slot": l.Term.String()}
		if code != http.StatusServiceUnavailable || !reflect.DeepEqual(got, want) {
			t.Errorf("GET /leader on a killed node: %d %s; want 503 {\"state\":\"no_leader\",\"term\":%d}", code, body, uint64(l.Term))
		}
		if code, body := httpGet(t, "http://"+d.HTTPAddr+"/leader/self"); code != http.StatusServiceUnavailable {
			t.Errorf("GET /leader/self on a killed node: %d %s; want 503", code, body)
		}
		if code, body := httpGet(t, "http://"+d.HTTPAddr+"/healthz"); code != http.StatusOK {
			t.Errorf("GET /healthz on a killed node (its process is up): %d %s", code, body)
		}
	})
}
