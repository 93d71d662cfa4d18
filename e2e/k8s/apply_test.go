package k8s

// Server-side apply of an overlay as `kubectl apply --server-side -k`
// would send it: every object through the API server's whole request path
// (schema and field validation, defaulting, admission), with every
// rejection and every warning recorded against the object it was about.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// fieldManager owns what the test applies (as kubectl's is "kubectl").
const fieldManager = "electord-e2e-manifests"

// kustomize builds the kustomization in dir as kubectl apply -k does and
// returns its objects in kustomize's order.
func kustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// warnings collects the Warning headers of the requests made with its
// context.
type warnings struct {
	mu   sync.Mutex
	text []string
}

type warningsKey struct{}

// warningRecorder hands each Warning header to the warnings in the
// request's context. A warning on a request made without one is kept in
// stray: nothing the API server says is dropped.
type warningRecorder struct{ stray *warnings }

func (r warningRecorder) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	w, ok := ctx.Value(warningsKey{}).(*warnings)
	if !ok {
		w = r.stray
	}
	w.mu.Lock()
	w.text = append(w.text, text)
	w.mu.Unlock()
}

// applier applies objects server-side into one namespace.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	ns     string
	stray  *warnings
}

func newApplier(t *testing.T, cfg *rest.Config, ns string) *applier {
	cfg = rest.CopyConfig(cfg)
	a := &applier{ns: ns, stray: &warnings{}}
	cfg.WarningHandlerWithContext = warningRecorder{stray: a.stray}
	var err error
	if a.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	a.mapper = restmapper.NewDiscoveryRESTMapper(groups)
	return a
}

// objectName names an object as the findings do: Kind namespace/name.
func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// apply sends u as a server-side apply (force=false: a conflict with
// another manager is an error, not a takeover), for real or, with dryRun,
// through validation and admission only (dryRun=All). It returns what
// the API server stored (or would have), and a finding for the error and
// for each warning, each naming the object. A namespaced object goes into
// the applier's namespace; one that names another namespace is a finding
// (the overlays are applied into whatever namespace kubectl is given).
func (a *applier) apply(u *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, []string) {
	u = u.DeepCopy()
	gvk := u.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: not served by this API server: %v", objectName(u), err)}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if ns := u.GetNamespace(); ns != "" && ns != a.ns {
			return nil, []string{fmt.Sprintf("%s: names namespace %q; the overlays leave the namespace to kubectl", objectName(u), ns)}
		}
		u.SetNamespace(a.ns)
		ri = a.dyn.Resource(mapping.Resource).Namespace(a.ns)
	}
	what := objectName(u)
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: false}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
		what += " (dry run)"
	}
	w := &warnings{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), warningsKey{}, w), 30*time.Second)
	defer cancel()
	got, err := ri.Apply(ctx, u.GetName(), u, opts)
	var findings []string
	if err != nil {
		findings = append(findings, fmt.Sprintf("%s: rejected: %v", what, err))
	}
	for _, text := range w.text {
		findings = append(findings, fmt.Sprintf("%s: warning: %s", what, text))
	}
	return got, findings
}

// strayWarnings returns the warnings of requests made without a
// collector (discovery), as findings.
func (a *applier) strayWarnings() []string {
	a.stray.mu.Lock()
	defer a.stray.mu.Unlock()
	var findings []string
	for _, text := range a.stray.text {
		findings = append(findings, "a request without an object: warning: "+text)
	}
	return findings
}

// applyAll applies objs for real, then again: the second apply must
// change nothing (its resourceVersion stays), or the server rewrites what
// the manifest says and every apply (a GitOps controller's every sync)
// fights it. Then it sends what the controllers that do not run here
// would create from the stored objects (a StatefulSet's pods and claims,
// statefulset_test.go) as dry runs: those are the requests where pod
// admission (PodSecurity enforcement, ServiceAccount, LimitRanger,
// ResourceQuota, DefaultStorageClass, AlwaysPullImages) decides. It
// returns every finding, and what the dry runs would have created.
func (a *applier) applyAll(objs []*unstructured.Unstructured) (findings []string, dryRuns []*unstructured.Unstructured) {
	stored := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		got, f := a.apply(u, false)
		findings = append(findings, f...)
		stored[i] = got
	}
	for i, u := range objs {
		if stored[i] == nil {
			continue
		}
		got, f := a.apply(u, false)
		findings = append(findings, f...)
		if got != nil && got.GetResourceVersion() != stored[i].GetResourceVersion() {
			findings = append(findings, fmt.Sprintf("%s: applying it again changed it (resourceVersion %s -> %s): the server does not keep what the manifest says",
				objectName(got), stored[i].GetResourceVersion(), got.GetResourceVersion()))
		}
	}
	for _, s := range stored {
		if s == nil {
			continue
		}
		children, err := controllerChildren(s)
		if err != nil {
			findings = append(findings, err.Error())
			continue
		}
		for _, c := range children {
			got, f := a.apply(c, true)
			findings = append(findings, f...)
			if got != nil {
				dryRuns = append(dryRuns, got)
			}
		}
	}
	return findings, dryRuns
}

// controllerChildren returns the objects a controller would make from the
// stored object s: a StatefulSet's pods and claims. Another kind with a
// pod template (a Deployment, a DaemonSet, a Job, a CronJob's job) is an
// error until this test learns to make its pods: its pods' admission
// would go unchecked.
func controllerChildren(s *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if s.GroupVersionKind() == appsv1.SchemeGroupVersion.WithKind("StatefulSet") {
		var set appsv1.StatefulSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.Object, &set); err != nil {
			return nil, fmt.Errorf("%s: %v", objectName(s), err)
		}
		return statefulSetChildren(&set)
	}
	_, found, _ := unstructured.NestedMap(s.Object, "spec", "template", "spec")
	_, inJob, _ := unstructured.NestedMap(s.Object, "spec", "jobTemplate", "spec", "template", "spec")
	if found || inJob {
		return nil, fmt.Errorf("%s: has a pod template, and this test makes pods for StatefulSets only: teach controllerChildren its pods", objectName(s))
	}
	return nil, nil
}
