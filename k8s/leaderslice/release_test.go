package leaderslice

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

func testService() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

// slice is the Service's slice naming pod at ip with term (annotations nil
// when term is "-").
func slice(pod, ip, term string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod}}}}
	if term != "-" {
		es.Annotations = map[string]string{AnnotationTerm: term, AnnotationPod: pod}
	}
	return es
}

func startWriter(t *testing.T, client Client, l *leadership, edit ...func(*Config)) *Writer {
	t.Helper()
	cfg := Config{Client: client, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "10.0.0.1",
		Events: l.events, Current: l.current, Resync: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	for _, e := range edit {
		e(&cfg)
	}
	w, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func getSlice(t *testing.T, client kubernetes.Interface) *discoveryv1.EndpointSlice {
	t.Helper()
	es, err := client.DiscoveryV1().EndpointSlices("ns").Get(context.Background(), "svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A slice whose annotations someone stripped (kubectl annotate ...-), still
// naming this pod: release neither panics (it wrote into a nil map, and
// the crash repeated at every start) nor empties what it cannot prove it
// wrote.
func TestReleaseOfASliceWithoutAnnotations(t *testing.T) {
	client := fake.NewClientset(testService())
	l := newLeadership()
	w := startWriter(t, clientset{client}, l)
	term := election.Term(4<<election.SlotBits | 1)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: term})
	es := waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	es.Annotations = nil
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The writer was never the one to release a term-less slice directly:
	// the same with a writer that never claimed.
	w2 := startWriter(t, clientset{client}, newLeadership())
	if err := w2.release(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopNow(t, w2)
}

func stopNow(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// A process with this pod's name that did not write the slice (a zombie
// of a force-deleted StatefulSet pod, at the old IP or the same one) leaves
// the slice of the pod's new incarnation alone; what it wrote itself it
// empties.
func TestReleaseOnlyWhatThisWriterWrote(t *testing.T) {
	for _, c := range []struct {
		name string
		es   *discoveryv1.EndpointSlice
	}{
		{"another address", slice("pod-1", "10.0.0.9", "999")},
		{"same address, another term", slice("pod-1", "10.0.0.1", "999")},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewClientset(testService(), c.es)
			l := newLeadership()
			w := startWriter(t, clientset{client}, l)
			// A follower: its first decision releases (reads only).
			l.set(node.LeaderInfo{ID: 2, Term: 999})
			if err := w.release(context.Background()); err != nil {
				t.Fatal(err)
			}
			stopNow(t, w)
			if es := getSlice(t, client); len(es.Endpoints) != 1 || w.Stats().Releases.Load() != 0 {
				t.Fatalf("a writer that never claimed emptied the slice: %+v", es)
			}
		})
	}
	// This writer claimed term 5; the pod's new incarnation (same name,
	// same IP) then claimed term 9: stepping down leaves it.
	client := fake.NewClientset(testService())
	l := newLeadership()
	w := startWriter(t, clientset{client}, l)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 5})
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	es := getSlice(t, client)
	es.Annotations[AnnotationTerm] = "9"
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.set(node.LeaderInfo{ID: 2, Term: 9})
	stopNow(t, w)
	if es := getSlice(t, client); len(es.Endpoints) != 1 || es.Annotations[AnnotationTerm] != "9" {
		t.Fatalf("the zombie emptied the new incarnation's slice: %+v", es)
	}
	// What it wrote itself, it empties on stop.
	client = fake.NewClientset(testService())
	l = newLeadership()
	w = startWriter(t, clientset{client}, l)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 5})
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	stopNow(t, w)
	if es := getSlice(t, client); len(es.Endpoints) != 0 || es.Annotations[AnnotationTerm] != "5" {
		t.Fatalf("not emptied on stop: %+v", es)
	}
}

// A follower's stop during an API outage makes no call and returns at
// once: it never claimed, so nothing of its own can be in the slice (it
// retried until the stop's bound and then logged an ERROR).
func TestFollowerStopMakesNoCall(t *testing.T) {
	client := fake.NewClientset(testService())
	var calls atomic.Int32
	client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		return true, nil, errors.New("connection refused")
	})
	l := newLeadership()
	w := startWriter(t, clientset{client}, l)
	l.set(node.LeaderInfo{ID: 2, Term: 7})
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := time.Now()
	err := w.Stop(ctx)
	n := calls.Load()
	if err != nil || time.Since(before) > time.Second {
		t.Fatalf("Stop: %v after %v; want nil at once", err, time.Since(before))
	}
	if calls.Load() != n {
		t.Fatal("Stop called the API server")
	}
}

// inflight wraps a client: the first Update blocks until gate closes. If
// its ctx is cancelled first it returns at once, as a real client does,
// and the server applies the update anyway right after it serves the next
// read (the race of finding 13).
type inflight struct {
	Client
	gate      chan struct{}
	started   chan struct{}
	cancelled chan struct{}
	once      sync.Once
	mu        sync.Mutex
	pending   func()
}

func (c *inflight) GetEndpointSlice(ctx context.Context, ns, name string) (*discoveryv1.EndpointSlice, error) {
	es, err := c.Client.GetEndpointSlice(ctx, ns, name)
	c.mu.Lock()
	p := c.pending
	c.pending = nil
	c.mu.Unlock()
	if p != nil {
		p() // committed right after this read was served
	}
	return es, err
}

func (c *inflight) UpdateEndpointSlice(ctx context.Context, ns string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	first := false
	c.once.Do(func() { first = true })
	if !first {
		return c.Client.UpdateEndpointSlice(ctx, ns, es)
	}
	close(c.started)
	select {
	case <-c.gate:
		return c.Client.UpdateEndpointSlice(context.Background(), ns, es)
	case <-ctx.Done():
		close(c.cancelled)
		c.mu.Lock()
		c.pending = func() { _, _ = c.Client.UpdateEndpointSlice(context.Background(), ns, es) }
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Stop while a claim's update is in flight: Stop lets it finish and then
// empties the slice. (It cancelled the call, read the slice before the
// server applied it, found nothing to empty, and the slice kept naming the
// stopped pod.)
func TestStopWaitsForTheCallInFlight(t *testing.T) {
	fc := fake.NewClientset(testService(), slice("pod-2", "10.0.0.2", "3"))
	c := &inflight{Client: clientset{fc}, gate: make(chan struct{}), started: make(chan struct{}), cancelled: make(chan struct{})}
	l := newLeadership()
	w := startWriter(t, c, l, func(cfg *Config) { cfg.RequestTimeout = 20 * time.Second })
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 9})
	<-c.started
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- w.Stop(ctx)
	}()
	<-w.stop
	// A cancelled call shows within microseconds; this writer's call must
	// not be cancelled: give it half a second to show, then let the
	// server answer.
	select {
	case <-c.cancelled:
	case <-time.After(500 * time.Millisecond):
		close(c.gate)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	es := getSlice(t, fc)
	if len(es.Endpoints) != 0 {
		t.Fatalf("after Stop the slice names %v (term %s): the update in flight was applied after the release read", es.Endpoints[0].TargetRef.Name, es.Annotations[AnnotationTerm])
	}
}

// Quorum mode: the subscription's first value is filtered by the lease (no
// leader) while the node has announced its leadership, and no event comes
// when the lease starts. With Announced the writer claims then, not at the
// next resync (an hour here).
func TestWriterClaimsWhenAnnouncedBeforeTheLease(t *testing.T) {
	client := fake.NewClientset(testService())
	term := election.Term(7<<election.SlotBits | 1)
	var asked atomic.Int32
	current := func() node.LeaderInfo {
		if asked.Add(1) > 3 { // the lease starts after a few looks
			return node.LeaderInfo{ID: 1, Self: true, Term: term}
		}
		return node.LeaderInfo{Term: term, State: "no_leader"}
	}
	events := make(chan node.LeaderInfo, 1)
	events <- node.LeaderInfo{Term: term, State: "no_leader"} // Subscribe's first value
	w, err := Start(Config{Client: clientset{client}, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "10.0.0.1",
		Events: events, Current: current, Resync: time.Hour,
		Announced: func() node.LeaderInfo { return node.LeaderInfo{ID: 1, Self: true, Term: term} }})
	if err != nil {
		t.Fatal(err)
	}
	defer stopNow(t, w)
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
}

// A Service whose targetPort is a name: the slice uses the port, and the
// writer says so once.
func TestNamedTargetPortWarnsOnce(t *testing.T) {
	svc := testService()
	svc.Spec.Ports[0].TargetPort = intstr.FromString("web")
	client := fake.NewClientset(svc)
	var buf bytes.Buffer
	var mu sync.Mutex
	l := newLeadership()
	w := startWriter(t, clientset{client}, l, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)) })
	for term := election.Term(1); term <= 3; term++ {
		l.set(node.LeaderInfo{ID: 1, Self: true, Term: term})
		waitSlice(t, client, "claimed", func(es *discoveryv1.EndpointSlice) bool {
			return es.Annotations[AnnotationTerm] == strconv.FormatUint(uint64(term), 10)
		})
	}
	stopNow(t, w)
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "targetPort is a name"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// A leader whose release failed (API down) leads again in a higher term and
// its claim fails too: the slice still holds its older claim, which is its
// own, and it empties it once the API server answers.
func TestReleaseAnOlderClaimOfThisWriter(t *testing.T) {
	client := fake.NewClientset(testService())
	var failing atomic.Bool
	client.PrependReactor("update", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("service unavailable")
		}
		return false, nil, nil
	})
	l := newLeadership()
	w := startWriter(t, clientset{client}, l)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 5})
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	failing.Store(true)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 9})
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Errors.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	l.set(node.LeaderInfo{ID: 2, Term: 10})
	failing.Store(false)
	stopNow(t, w)
	// (A retry of the claim in term 9 may have slipped in just as the
	// API server came back: then that is emptied.)
	if es := getSlice(t, client); len(es.Endpoints) != 0 {
		t.Fatalf("this writer's claim (term %s) was not emptied: %+v", es.Annotations[AnnotationTerm], es)
	}
}

// A release the Role forbids ends Stop at once with the refusal: retrying
// it cannot succeed before the Role changes, and held a stopping process
// for its whole bound. The slice keeps this writer's claim.
func TestStopEndsAtARefusedRelease(t *testing.T) {
	client := fake.NewClientset(testService())
	var refusing atomic.Bool
	var updates atomic.Int32
	client.PrependReactor("update", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !refusing.Load() {
			return false, nil, nil
		}
		updates.Add(1)
		return true, nil, apierrors.NewForbidden(discoveryv1.Resource("endpointslices"), "svc", errors.New("the Role has no update"))
	})
	l := newLeadership()
	w := startWriter(t, clientset{client}, l)
	l.set(node.LeaderInfo{ID: 1, Self: true, Term: 5})
	waitSlice(t, client, "names pod-1", func(es *discoveryv1.EndpointSlice) bool { return len(es.Endpoints) == 1 })
	refusing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := w.Stop(ctx)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Stop: %v, want the Forbidden refusal", err)
	}
	if ctx.Err() != nil || updates.Load() != 1 {
		t.Fatalf("Stop retried the refused release: %d updates, its bound ended: %v", updates.Load(), ctx.Err())
	}
	if es := getSlice(t, client); len(es.Endpoints) != 1 {
		t.Fatalf("the slice changed: %+v", es)
	}
}
