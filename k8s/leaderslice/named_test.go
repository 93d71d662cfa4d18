package leaderslice

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// A Service that follows a named election: the slice names this pod, Ready,
// while the node stands for the app that leads it, records the election
// beside its token, and is emptied as soon as the leadership goes, whether
// to another node or to nobody (the app closed its campaign): no endpoint,
// rather than one marked not Ready, so nothing routes to a pod whose app
// does not lead.
func TestWriterFollowsANamedElection(t *testing.T) {
	client := fake.NewClientset(testService())
	l := newLeadership()
	w := startWriter(t, clientset{client}, l, func(c *Config) { c.Election = "jobs" })
	defer stopNow(t, w)
	term := election.Term(2<<election.SlotBits | 1)
	l.set(node.LeaderInfo{Election: "jobs", ID: 1, Self: true, Term: term, Value: "pod-1:8080"})
	es := waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	if es.Annotations[AnnotationElection] != "jobs" || es.Annotations[AnnotationTerm] != "131073" || es.Annotations[AnnotationPod] != "pod-1" {
		t.Errorf("annotations %v", es.Annotations)
	}
	if c := es.Endpoints[0].Conditions; c.Ready == nil || !*c.Ready || c.Serving == nil || !*c.Serving || c.Terminating == nil || *c.Terminating {
		t.Errorf("conditions %+v: want ready and serving while the app leads", c)
	}
	// The app closed its campaign and nobody else stands: no leader.
	l.set(node.LeaderInfo{Election: "jobs", Term: term, State: node.StateNoLeader})
	es = waitSlice(t, client, "emptied", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 0 })
	if es.Annotations[AnnotationTerm] != "131073" || es.Annotations[AnnotationElection] != "jobs" {
		t.Errorf("the release must keep the election's term: %v", es.Annotations)
	}
	// Leading again at a new token (a new app), then another node leads.
	next := election.Term(3<<election.SlotBits | 1)
	l.set(node.LeaderInfo{Election: "jobs", ID: 1, Self: true, Term: next})
	waitSlice(t, client, "names pod-1 again", func(es *discoveryv1.EndpointSlice) bool {
		return len(es.Endpoints) == 1 && es.Annotations[AnnotationTerm] == "196609"
	})
	l.set(node.LeaderInfo{Election: "jobs", ID: 2, Term: next + 1, State: node.StateFollower})
	waitSlice(t, client, "emptied for the other node", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 0 })
}

// Terms of two elections are not comparable: a writer does not overwrite a
// slice that names a pod for another election, whatever the terms say; it
// takes the slice over once that pod's writer has emptied it, and from then
// on fences by its own election's terms (lower than the other's here).
func TestWriterWaitsForAnotherElectionsPodToLeave(t *testing.T) {
	old := slice("pod-0", "10.0.0.9", "9999999") // the default election's, at a high term
	old.Annotations[AnnotationTermHuman] = "152.38943"
	client := fake.NewClientset(testService(), old)
	l := newLeadership()
	w := startWriter(t, clientset{client}, l, func(c *Config) { c.Election = "jobs"; c.Resync = 5 * time.Millisecond })
	defer stopNow(t, w)
	l.set(node.LeaderInfo{Election: "jobs", ID: 1, Self: true, Term: 5})
	waitFor(t, func() bool { return w.Stats().Stale.Load() >= 2 }, func() string { return "the other election's slice was not refused" })
	if es := getSlice(t, client); es.Endpoints[0].TargetRef.Name != "pod-0" || w.Stats().Claims.Load() != 0 {
		t.Fatalf("overwrote the other election's pod: %+v", es)
	}
	// pod-0's writer stops and empties the slice (its term stays).
	es := getSlice(t, client)
	es.Endpoints = nil
	es.Annotations[AnnotationPod] = ""
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	es = waitSlice(t, client, "taken over by jobs' leader", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	if es.Endpoints[0].TargetRef.Name != "pod-1" || es.Annotations[AnnotationElection] != "jobs" || es.Annotations[AnnotationTerm] != "5" {
		t.Errorf("after the takeover: %+v %v", es.Endpoints, es.Annotations)
	}
	// Within the election the term fences as before: an older leadership
	// of jobs does not come back.
	l.set(node.LeaderInfo{Election: "jobs", ID: 1, Self: true, Term: 4})
	waitFor(t, func() bool { return w.Stats().Stale.Load() >= 3 }, func() string { return "a lower term of jobs was not refused" })
}

// A writer of the default election ignores an empty slice left by a
// named election's writer (the Service was switched back), and the
// annotation goes.
func TestDefaultWriterTakesAnEmptyNamedSlice(t *testing.T) {
	left := slice("pod-0", "10.0.0.9", "77777777")
	left.Endpoints = nil
	left.Annotations[AnnotationElection] = "jobs"
	client := fake.NewClientset(testService(), left)
	l := newLeadership()
	w := startWriter(t, clientset{client}, l)
	defer stopNow(t, w)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 3})
	es := waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	if _, ok := es.Annotations[AnnotationElection]; ok || es.Annotations[AnnotationTerm] != "3" {
		t.Errorf("annotations %v", es.Annotations)
	}
}
