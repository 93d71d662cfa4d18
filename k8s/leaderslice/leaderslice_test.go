package leaderslice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// The API server's behaviour (resourceVersion conflicts, RBAC) is tested
// against a real kube-apiserver in e2e/k8s; these tests cover the
// writer's own decisions.

func TestValidateNamesTheMissingField(t *testing.T) {
	ok := Config{Client: clientset{fake.NewClientset()}, Namespace: "ns", Service: "svc", PodName: "p", PodIP: "10.0.0.1",
		Events: make(chan node.LeaderInfo), Current: func() node.LeaderInfo { return node.LeaderInfo{} }}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, edit := range map[string]func(*Config){
		"no Kubernetes client":   func(c *Config) { c.Client = nil },
		"no namespace":           func(c *Config) { c.Namespace = "" },
		"no Service name":        func(c *Config) { c.Service = "" },
		"no pod name":            func(c *Config) { c.PodName = "" },
		"no leadership source":   func(c *Config) { c.Current = nil },
		`"pod-0" is not an IP`:   func(c *Config) { c.PodIP = "pod-0" },
		`pod IP "" is not an IP`: func(c *Config) { c.PodIP = "" },
	} {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func TestPortsFromTheService(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},             // no targetPort: the port
		{Name: "grpc", Port: 9090, TargetPort: intstr.FromString("grpc")}, // a name: the port
	}}}
	got := Ports(svc)
	want := []struct {
		name  string
		port  int32
		proto corev1.Protocol
	}{{"http", 8080, corev1.ProtocolTCP}, {"dns", 53, corev1.ProtocolUDP}, {"grpc", 9090, corev1.ProtocolTCP}}
	if len(got) != len(want) {
		t.Fatalf("%d ports, want %d", len(got), len(want))
	}
	for i, w := range want {
		if *got[i].Name != w.name || *got[i].Port != w.port || *got[i].Protocol != w.proto {
			t.Errorf("port %d = %s %d %s, want %+v", i, *got[i].Name, *got[i].Port, *got[i].Protocol, w)
		}
	}
}

func TestRecordedTerm(t *testing.T) {
	es := &discoveryv1.EndpointSlice{}
	if got, err := RecordedTerm(es); got != 0 || err != nil {
		t.Errorf("no annotation: %d %v", got, err)
	}
	es.Annotations = map[string]string{AnnotationTerm: "65538"}
	if got, err := RecordedTerm(es); got != 65538 || err != nil {
		t.Errorf("65538: %d %v", got, err)
	}
	es.Annotations[AnnotationTerm] = "1.2"
	if _, err := RecordedTerm(es); err == nil || !strings.Contains(err.Error(), AnnotationTerm) {
		t.Errorf("garbage: %v", err)
	}
}

// leadership is a node as the writer sees it.
type leadership struct {
	events chan node.LeaderInfo
	li     chan node.LeaderInfo // the current state, one slot
}

func newLeadership() *leadership {
	l := &leadership{events: make(chan node.LeaderInfo, 16), li: make(chan node.LeaderInfo, 1)}
	l.li <- node.LeaderInfo{}
	return l
}

func (l *leadership) set(li node.LeaderInfo) {
	<-l.li
	l.li <- li
	l.events <- li
}

func (l *leadership) current() node.LeaderInfo {
	li := <-l.li
	l.li <- li
	return li
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool, failure func() string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal(failure())
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

func waitSlice(t *testing.T, client *fake.Clientset, what string, ok func(*discoveryv1.EndpointSlice) bool) *discoveryv1.EndpointSlice {
	t.Helper()
	var es *discoveryv1.EndpointSlice
	var err error
	waitFor(t, func() bool {
		es, err = client.DiscoveryV1().EndpointSlices("ns").Get(context.Background(), "svc", metav1.GetOptions{})
		return err == nil && ok(es)
	}, func() string { return fmt.Sprintf("slice never %s: %+v %v", what, es, err) })
	return es
}

func TestWriterClaimsRefusesAndReleases(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", UID: "u1"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	})
	l := newLeadership()
	w, err := Start(Config{Client: clientset{client}, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "10.0.0.1",
		Events: l.events, Current: l.current, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	term := election.Term(3<<election.SlotBits | 1)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: term})
	es := waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	if es.Labels[discoveryv1.LabelServiceName] != "svc" || es.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		t.Errorf("labels %v", es.Labels)
	}
	if es.Annotations[AnnotationTerm] != "196609" || es.Annotations[AnnotationTermHuman] != "3.1" || es.Annotations[AnnotationPod] != "pod-1" {
		t.Errorf("annotations %v", es.Annotations)
	}
	if ep := es.Endpoints[0]; ep.Addresses[0] != "10.0.0.1" || ep.TargetRef.Name != "pod-1" || *es.Ports[0].Port != 8080 || es.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("endpoint %+v ports %+v", ep, es.Ports)
	}
	if len(es.OwnerReferences) != 0 {
		t.Errorf("ownerReferences %+v: none wanted (they need delete under OwnerReferencesPermissionEnforcement)", es.OwnerReferences)
	}
	// The writer records what it wrote when its create returns, which can
	// be after the fake API server already shows the slice (CI saw the
	// check lose that race once): wait for it, with a deadline.
	waitFor(t, func() bool { return w.Snapshot().Named },
		func() string { return "Snapshot().Named is still false 10s after the slice named this pod" })

	// Another pod wrote a higher term: this one, still leading in its
	// lower term (a stale leader), does not overwrite it.
	es.Annotations[AnnotationTerm] = "999999"
	es.Endpoints[0].TargetRef.Name, es.Endpoints[0].Addresses = "pod-2", []string{"10.0.0.2"}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: term})
	waitFor(t, func() bool { return w.Stats().Stale.Load() != 0 },
		func() string { return "the stale claim was not refused" })
	// Stepping down while the slice names another pod leaves it alone.
	l.set(node.LeaderInfo{ID: 2, Term: 999999})
	// Leading again in a higher term: it claims, and on stop empties the
	// slice and keeps the term.
	higher := election.Term(999999 + 1)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: higher})
	waitSlice(t, client, "names pod-1 in the higher term", func(es *discoveryv1.EndpointSlice) bool {
		return es.Annotations[AnnotationTerm] == "1000000" && len(es.Endpoints) == 1 && es.Endpoints[0].TargetRef.Name == "pod-1"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	es = waitSlice(t, client, "emptied", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 0 })
	if es.Annotations[AnnotationTerm] != "1000000" || es.Annotations[AnnotationPod] != "" {
		t.Errorf("after release: %v", es.Annotations)
	}
}

func TestWriterRefusesASelectorService(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "x"}},
	})
	l := newLeadership()
	w, err := Start(Config{Client: clientset{client}, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "fd00::1",
		Events: l.events, Current: l.current, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 5})
	waitFor(t, func() bool { return w.Stats().Errors.Load() != 0 },
		func() string { return "no error counted" })
	if w.Stats().Claims.Load() != 0 {
		t.Fatalf("errors %d claims %d", w.Stats().Errors.Load(), w.Stats().Claims.Load())
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.service(context.Background()); err == nil || !strings.Contains(err.Error(), "has a selector") {
		t.Errorf("service check: %v", err)
	}
}

// In quorum mode a node announces its leadership before its lease is held
// (Leader() says no leader until the first acknowledgements), and no event
// follows when the lease starts: the writer must claim then, not at the
// next resync.
func TestWriterClaimsWhenTheLeaseStarts(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}})
	events := make(chan node.LeaderInfo, 4)
	var held atomic.Bool
	asked := make(chan struct{}, 1) // the writer asked while the lease was not held
	term := election.Term(7<<election.SlotBits | 1)
	current := func() node.LeaderInfo {
		if held.Load() {
			return node.LeaderInfo{ID: 1, Self: true, Term: term}
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		return node.LeaderInfo{Term: term, State: "no_leader"}
	}
	w, err := Start(Config{Client: clientset{client}, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "10.0.0.1",
		Events: events, Current: current, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	<-asked // the first event (none): the writer asked
	events <- node.LeaderInfo{ID: 1, Self: true, Term: term}
	<-asked          // it asked after the event, before the lease started
	held.Store(true) // no event
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
}

// An update refused for a stale resourceVersion is read again and decided
// again, not overwritten blindly; the slice is written once.
func TestWriterRereadsOnConflict(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", ResourceVersion: "1",
			Annotations: map[string]string{AnnotationTerm: "3"}}, AddressType: discoveryv1.AddressTypeIPv4})
	var updates atomic.Int32
	client.PrependReactor("update", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if updates.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(discoveryv1.Resource("endpointslices"), "svc", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	l := newLeadership()
	w, err := Start(Config{Client: clientset{client}, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "10.0.0.1",
		Events: l.events, Current: l.current, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 9})
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	if c, n := w.Stats().Conflicts.Load(), updates.Load(); c != 1 || n != 2 {
		t.Errorf("conflicts %d, updates %d; want 1 and 2", c, n)
	}
	if e := w.Stats().Errors.Load(); e != 0 {
		t.Errorf("a conflict counted as an error (%d)", e)
	}
}
