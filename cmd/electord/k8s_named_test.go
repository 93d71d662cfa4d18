package main

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/k8s/leaderslice"
)

// With k8s-leader-election, a real node's writer follows the named
// election: the slice names this pod while an app campaigning through
// this node leads, is emptied when the app closes its campaign, names the
// pod again (at a new token) for the next app, and is emptied when the
// node stops.
func TestK8sRoutingFollowsANamedElection(t *testing.T) {
	cfg := devcluster.Config(1, devcluster.Options{Nodes: 1, Algorithm: "bully"}, t.TempDir(), nil)
	d, err := daemon.Start(cfg, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	client := &memSlices{}
	k := &k8sRouting{client: client, t: k8sTarget{rest: &rest.Config{}, namespace: "ns", service: "svc", pod: "pod-1", ip: "10.0.0.1", election: "jobs"}}
	stop, err := k.start(d, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	slice := func(what string, ok func(*discoveryv1.EndpointSlice) bool) *discoveryv1.EndpointSlice {
		t.Helper()
		var es *discoveryv1.EndpointSlice
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			client.mu.Lock()
			es = client.es.DeepCopy()
			client.mu.Unlock()
			if es != nil && ok(es) {
				return es
			}
			if time.Now().After(deadline) {
				t.Fatalf("the slice never %s: %+v", what, es)
			}
		}
	}
	named := func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 }
	empty := func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 0 }

	// The default election has a leader (this node) all along: the slice
	// names nobody until an app leads jobs.
	ctx := context.Background()
	c1, err := d.Node.Campaign(ctx, "jobs", "pod-1:8080", 0)
	if err != nil {
		t.Fatal(err)
	}
	es := slice("named pod-1", named)
	first := es.Annotations[leaderslice.AnnotationTerm]
	if es.Annotations[leaderslice.AnnotationElection] != "jobs" || es.Endpoints[0].TargetRef.Name != "pod-1" {
		t.Fatalf("slice %+v", es)
	}
	if li, _ := d.Node.ElectionLeader("jobs"); first != strconv.FormatUint(uint64(li.Term), 10) {
		t.Errorf("the slice records term %s, jobs' token is %d", first, uint64(li.Term))
	}
	c1.Close()
	slice("emptied after the app closed its campaign", empty)

	c2, err := d.Node.Campaign(ctx, "jobs", "pod-1:8080", 0)
	if err != nil {
		t.Fatal(err)
	}
	es = slice("named pod-1 for the next app", func(es *discoveryv1.EndpointSlice) bool {
		return named(es) && es.Annotations[leaderslice.AnnotationTerm] != first
	})
	t.Logf("tokens: first app %s, next app %s", first, es.Annotations[leaderslice.AnnotationTerm])
	defer c2.Close()
	d.Stop()
	slice("emptied when the node stopped", empty)
}
