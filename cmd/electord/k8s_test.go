package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electord/electord/config"
	"github.com/electord/electord/k8s/leaderslice"
	"github.com/electord/electord/node"
)

func TestK8sSettingsDefaultsAndErrors(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	nsFile := filepath.Join(dir, "namespace")
	if err := os.WriteFile(nsFile, []byte("apps\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := config.Config{K8sLeaderService: "my-app-leader", Kubeconfig: kc, AdvertiseHost: "10.1.2.3"}

	got, err := k8sSettings(base, nsFile)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if got.namespace != "apps" || got.pod != host || got.ip != "10.1.2.3" || got.rest.Host != "https://10.0.0.1:6443" || got.rest.BearerToken != "t" {
		t.Errorf("defaults: %+v", got)
	}

	for want, edit := range map[string]func(*config.Config, *string){
		"kubeconfig: ":                   func(c *config.Config, _ *string) { c.Kubeconfig = filepath.Join(dir, "missing") },
		"kubeconfig: not set":            func(c *config.Config, _ *string) { c.Kubeconfig = "" },
		"k8s-namespace: not set":         func(_ *config.Config, f *string) { *f = filepath.Join(dir, "missing") },
		"k8s-pod-ip: not set":            func(c *config.Config, _ *string) { c.AdvertiseHost = "" },
		`k8s-pod-ip: "pod-0" is not`:     func(c *config.Config, _ *string) { c.K8sPodIP = "pod-0" },
		`advertise-host (the default of`: func(c *config.Config, _ *string) { c.AdvertiseHost = "node-1.example" },
	} {
		c, f := base, nsFile
		edit(&c, &f)
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		if _, err := k8sSettings(c, f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	set := base
	set.K8sNamespace, set.K8sPodName, set.K8sPodIP = "ns2", "web-0", "fd00::7"
	if got, err := k8sSettings(set, filepath.Join(dir, "missing")); err != nil || got.namespace != "ns2" || got.pod != "web-0" || got.ip != "fd00::7" {
		t.Errorf("explicit keys: %+v %v", got, err)
	}
}

// The writer's counters and whether the slice names this pod are on
// /metrics (a whole-cluster term reset shows as stale claims and named 0).
func TestK8sMetrics(t *testing.T) {
	client := &memSlices{}
	k := &k8sRouting{client: client}
	reg := prometheus.NewRegistry()
	reg.MustRegister(k.collectors()...)
	if _, ok := gauge(t, reg, "electord_leader_slice_named", ""); ok {
		t.Fatal("metrics before the writer runs")
	}
	events := make(chan node.LeaderInfo, 1)
	events <- node.LeaderInfo{ID: 1, Self: true, Term: 5}
	w, err := leaderslice.Start(leaderslice.Config{Client: client, Namespace: "ns", Service: "svc", PodName: "pod-1", PodIP: "10.0.0.1",
		Events: events, Current: func() node.LeaderInfo { return node.LeaderInfo{ID: 1, Self: true, Term: 5} }, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	k.w.Store(w)
	deadline := time.Now().Add(10 * time.Second)
	for {
		named, _ := gauge(t, reg, "electord_leader_slice_named", "")
		claims, _ := gauge(t, reg, "electord_leader_slice_writes_total", "claim")
		if named == 1 && claims == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("named %v, claims %v; want 1 and 1", named, claims)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if stale, ok := gauge(t, reg, "electord_leader_slice_writes_total", "stale"); !ok || stale != 0 {
		t.Errorf("stale %v %v", stale, ok)
	}
}

// memSlices is a leaderslice.Client of one namespace in memory: a
// Service without a selector and its EndpointSlice, if written.
type memSlices struct {
	mu sync.Mutex
	es *discoveryv1.EndpointSlice
}

func (m *memSlices) GetService(_ context.Context, ns, name string) (*corev1.Service, error) {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, nil
}

func (m *memSlices) GetEndpointSlice(_ context.Context, _, name string) (*discoveryv1.EndpointSlice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.es == nil {
		return nil, apierrors.NewNotFound(discoveryv1.Resource("endpointslices"), name)
	}
	return m.es.DeepCopy(), nil
}

func (m *memSlices) CreateEndpointSlice(_ context.Context, _ string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.es != nil {
		return nil, apierrors.NewAlreadyExists(discoveryv1.Resource("endpointslices"), es.Name)
	}
	m.es = es.DeepCopy()
	return es, nil
}

func (m *memSlices) UpdateEndpointSlice(_ context.Context, _ string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.es = es.DeepCopy()
	return es, nil
}

// The product binary links client-go's rest client and the two API groups
// leader-only routing uses, never client-go's scheme of every API group
// (k8s.io/client-go/kubernetes/scheme, registered at process start: about
// 19 MB of every electord's idle memory, k8s routing on or not; see
// docs/BENCHMARKS.md). A typed client (k8s.io/client-go/kubernetes/typed/...)
// or the clientset brings it back.
func TestBinaryLinksNoSchemeOfEveryAPIGroup(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/electord/electord/cmd/electord").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var groups []string
	for pkg := range strings.FieldsSeq(string(out)) {
		switch {
		case pkg == "k8s.io/client-go/kubernetes/scheme", strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/typed/"), pkg == "k8s.io/client-go/kubernetes":
			t.Errorf("electord links %s, which registers every API group's types at start", pkg)
		case strings.HasPrefix(pkg, "k8s.io/api/"):
			groups = append(groups, pkg)
		}
	}
	slices.Sort(groups)
	if want := []string{"k8s.io/api/core/v1", "k8s.io/api/discovery/v1"}; !slices.Equal(groups, want) {
		t.Errorf("electord links the API groups %v, want only %v", groups, want)
	}
}

// gauge reads the series name (with result=result, if set) from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, result string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if result != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != result) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}
