package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
)

// scrape is one real HTTP scrape of d's /metrics, parsed.
type scrape map[string]*dto.MetricFamily

func scrapeOf(t *testing.T, d *daemon.Daemon) scrape {
	t.Helper()
	resp, err := http.Get("http://" + d.HealthAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value is the sample of name whose labels include want (name=value
// pairs); for a histogram, its count. -1 when there is none.
func (s scrape) value(name string, want ...string) float64 {
	f := s["electord_"+name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// sum adds name's samples over every node.
func sum(scrapes []scrape, name string, want ...string) float64 {
	var total float64
	for _, s := range scrapes {
		total += max(0, s.value(name, want...))
	}
	return total
}

func scrapeAll(t *testing.T, ds []*daemon.Daemon) []scrape {
	var out []scrape
	for _, d := range ds {
		out = append(out, scrapeOf(t, d))
	}
	return out
}

// Metrics move as the cluster does: a leader, then its kill (leader
// changes, elections, a new leader at a higher term, durations observed),
// a message refused by the peer port and one refused by the node, API
// calls and watchers, and the L/F pool's gauges.
func TestMetricsFollowTheCluster(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Nodes: 3, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	old := agreedLeader(t, c.Nodes)
	var rest []*daemon.Daemon
	for _, d := range c.Nodes {
		if d != old {
			rest = append(rest, d)
		}
	}
	// Every node agrees on the leader and its term; one node has role leader.
	var before []scrape
	waitFor(t, 5*time.Second, "every node names the leader", func() bool {
		before = scrapeAll(t, c.Nodes)
		for _, s := range before {
			if s.value("leader_id") != float64(old.Config.ID) {
				return false
			}
		}
		return true
	})
	term := before[0].value("leader_term")
	if term <= 0 || sum(before, "role", "role", "leader") != 1 || sum(before, "role", "role", "follower") != 2 {
		t.Fatalf("term %v, leaders %v, followers %v", term, sum(before, "role", "role", "leader"), sum(before, "role", "role", "follower"))
	}
	if e := election.Term(term).Epoch(); before[0].value("leader_term_epoch") != float64(e) {
		t.Errorf("leader_term_epoch %v, want %d", before[0].value("leader_term_epoch"), e)
	}
	// Gossip reports every member alive on its own time: a node can name
	// the leader while a member is still suspect in its view (under two CPU
	// hogs memberlist's probes time out), so this is waited for.
	waitFor(t, 10*time.Second, "gossip_members alive 3 on every node", func() bool {
		for _, s := range scrapeAll(t, c.Nodes) {
			if s.value("gossip_members", "state", "alive") != 3 {
				return false
			}
		}
		return true
	})
	for i, s := range before {
		d := c.Nodes[i]
		if s.value("killed") != 0 || s.value("term_persist_fault") != 0 {
			t.Errorf("node %d: killed %v fault %v", d.Config.ID, s.value("killed"), s.value("term_persist_fault"))
		}
		if s.value("peer_pool_goroutines", "activity", "live") <= 0 {
			t.Errorf("node %d: no L/F pool gauges", d.Config.ID)
		}
	}
	if sum(before, "messages_sent_total", "type", "Heartbeat") == 0 {
		// Followers heartbeat every 200 ms: wait for the first.
		waitFor(t, 3*time.Second, "heartbeats counted", func() bool {
			return sum(scrapeAll(t, c.Nodes), "messages_sent_total", "type", "Heartbeat") > 0
		})
	}

	// Kill the leader: the others elect a new one at a higher term.
	if err := old.Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	var after []scrape
	waitFor(t, 10*time.Second, "a new leader in the metrics", func() bool {
		after = scrapeAll(t, rest)
		id := after[0].value("leader_id")
		return id > 0 && id != float64(old.Config.ID) && after[1].value("leader_id") == id
	})
	if got := after[0].value("leader_term"); got <= term {
		t.Errorf("leader_term %v after the kill, was %v", got, term)
	}
	if sum(after, "role", "role", "leader") != 1 {
		t.Errorf("after the kill: %v nodes with role leader", sum(after, "role", "role", "leader"))
	}
	for i, s := range after {
		if got, was := s.value("leader_changes_total"), before[slicesIndex(c.Nodes, rest[i])].value("leader_changes_total"); got <= was {
			t.Errorf("node %d: leader_changes_total %v, was %v", rest[i].Config.ID, got, was)
		}
	}
	// Gossip reports the killed node gone on its own time.
	for _, d := range rest {
		waitFor(t, 10*time.Second, "gossip_members dead 1", func() bool {
			return scrapeOf(t, d).value("gossip_members", "state", "dead") == 1
		})
	}
	var beforeRest []scrape
	for _, d := range rest {
		beforeRest = append(beforeRest, before[slicesIndex(c.Nodes, d)])
	}
	if sum(after, "elections_started_total") <= sum(beforeRest, "elections_started_total") ||
		sum(after, "elections_won_total") <= sum(beforeRest, "elections_won_total") {
		for _, d := range c.Nodes {
			t.Logf("node %d: %+v", d.Config.ID, d.Node.Elections())
		}
		t.Errorf("elections started %v -> %v, won %v -> %v", sum(beforeRest, "elections_started_total"), sum(after, "elections_started_total"),
			sum(beforeRest, "elections_won_total"), sum(after, "elections_won_total"))
	}
	if sum(after, "leader_failures_detected_total") < 1 || sum(after, "failure_detection_seconds") < 1 {
		t.Errorf("the leader's failure was not detected: %v, histogram count %v",
			sum(after, "leader_failures_detected_total"), sum(after, "failure_detection_seconds"))
	}
	if sum(after, "election_duration_seconds", "outcome", "won") < 1 {
		t.Errorf("no won election observed in election_duration_seconds")
	}
	if sum(after, "term_persist_seconds", "result", "ok") < 1 {
		t.Errorf("no term write observed in term_persist_seconds")
	}
	// The elections are on record for the status page too.
	var won bool
	for _, d := range rest {
		for _, r := range d.Node.Elections() {
			won = won || (r.Won && r.Term > election.Term(term) && !r.Ended.IsZero() && r.Messages > 0 && r.Cause != "")
		}
	}
	if !won {
		t.Errorf("no won election with messages in Elections(): %+v / %+v", rest[0].Node.Elections(), rest[1].Node.Elections())
	}

	// Bad peer messages: a malformed one (no sender), refused by the peer
	// port, and one from a node that is not a member, refused by the node.
	target := rest[0]
	conn, err := grpc.NewClient(target.PeerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	peer := pb.NewPeerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s0 := scrapeOf(t, target)
	if _, err := peer.Coordinator(ctx, &pb.Coordinator{To: uint64(target.Config.ID), Term: 5}); err == nil {
		t.Errorf("a Coordinator without a sender was accepted")
	}
	stranger := uint64(99)
	_, _ = peer.Coordinator(ctx, &pb.Coordinator{From: stranger, To: uint64(target.Config.ID), Leader: stranger,
		Term: uint64(election.Term(1000<<election.SlotBits | stranger)), Confirmed: true})
	waitFor(t, 5*time.Second, "both refusals counted", func() bool {
		s := scrapeOf(t, target)
		return s.value("messages_refused_total", "type", "unknown", "reason", "malformed") > max(0, s0.value("messages_refused_total", "type", "unknown", "reason", "malformed")) &&
			s.value("messages_refused_total", "type", "Coordinator", "reason", "not_a_member") > max(0, s0.value("messages_refused_total", "type", "Coordinator", "reason", "not_a_member"))
	})

	// API calls and a watcher, through the real API and sidecar.
	api, err := grpc.NewClient(target.APIAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if _, err := pb.NewElectorClient(api).GetLeader(ctx, &pb.GetLeaderRequest{}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	stream, err := pb.NewElectorClient(api).WatchLeader(wctx, &pb.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, "http://"+target.HTTPAddr+"/leader"); code != 200 {
		t.Errorf("/leader: %d", code)
	}
	s := scrapeOf(t, target)
	if s.value("api_calls_total", "server", "grpc", "method", "GetLeader", "code", "OK") != 1 ||
		s.value("api_calls_total", "server", "http", "method", "/leader", "code", "200") != 1 ||
		s.value("api_watchers", "server", "grpc") != 1 || s.value("connections", "listener", "api") < 1 {
		t.Errorf("API metrics: GetLeader %v, /leader %v, grpc watchers %v, api conns %v",
			s.value("api_calls_total", "server", "grpc", "method", "GetLeader", "code", "OK"),
			s.value("api_calls_total", "server", "http", "method", "/leader", "code", "200"),
			s.value("api_watchers", "server", "grpc"), s.value("connections", "listener", "api"))
	}
	wcancel()
	waitFor(t, 5*time.Second, "the watcher gone", func() bool {
		return scrapeOf(t, target).value("api_watchers", "server", "grpc") == 0
	})

	// gRPC health on the API port: serving, as /readyz says.
	hc := healthpb.NewHealthClient(api)
	for _, svc := range []string{"", "electord.v1.Elector"} {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("grpc health %q: %v %v", svc, r.GetStatus(), err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); err == nil || !strings.Contains(err.Error(), "unknown service") {
		t.Errorf("grpc health of an unknown service: %v", err)
	}
	// The killed node is alive but not ready, by gRPC too.
	oc, err := grpc.NewClient(old.APIAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	if r, err := healthpb.NewHealthClient(oc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("grpc health of the killed node: %v %v", r.GetStatus(), err)
	}
	if s := scrapeOf(t, old); s.value("killed") != 1 || s.value("role", "role", "no_leader") != 1 {
		t.Errorf("killed node: killed %v, role no_leader %v", s.value("killed"), s.value("role", "role", "no_leader"))
	}
	// A Watch sees readiness change: SERVING, then NOT_SERVING once the
	// node is killed.
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch answer: %v %v", r.GetStatus(), err)
	}
	if n := scrapeOf(t, target).value("api_watchers", "server", "grpc"); n != 0 {
		t.Errorf("a health Watch counted as %v leadership watchers", n)
	}
	if err := target.Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Watch after the kill: %v %v", r.GetStatus(), err)
	}
}

// agreedLeader waits until every node of ds names the same leader in the
// same term, and returns it.
func agreedLeader(t *testing.T, ds []*daemon.Daemon) *daemon.Daemon {
	t.Helper()
	var leader *daemon.Daemon
	waitFor(t, 10*time.Second, "every node names the same leader", func() bool {
		first := ds[0].Node.Leader()
		for _, d := range ds {
			li := d.Node.Leader()
			if !li.HasLeader() || li.ID != first.ID || li.Term != first.Term {
				return false
			}
			if li.Self {
				leader = d
			}
		}
		return leader != nil
	})
	return leader
}

func slicesIndex(ds []*daemon.Daemon, d *daemon.Daemon) int {
	for i, x := range ds {
		if x == d {
			return i
		}
	}
	return -1
}
