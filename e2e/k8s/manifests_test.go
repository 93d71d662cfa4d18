package k8s

// The manifests as a cluster judges them: every overlay under
// deploy/k8s/overlays applied server-side to a real kube-apiserver that
// runs a production cluster's admission (controlplane_test.go), each into
// a namespace set up as a tenant's namespace often is (a ResourceQuota
// that asks every container for requests and limits, a LimitRange, a
// default StorageClass). Any rejection or warning fails, naming the object
// and the API server's message. TestManifestsApply/catches applies broken
// variants of an overlay (testdata/broken) to show that each kind of
// finding fails.

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/electord/electord/tools/faultnet"
)

// manifestsControlPlane starts etcd and the API server in a network
// namespace of their own (a faultnet hub without nodes), with the default
// StorageClass every namespace's claims get.
func manifestsControlPlane(t *testing.T) *controlPlane {
	apiserver, etcd := controlPlaneBinaries(t)
	c, err := faultnet.New(faultnet.Config{Nodes: 0, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cp := startControlPlane(t, c, apiserver, etcd) // stopped before c.Close
	checkAdmissionPlugins(t, cp)
	admin := kubernetes.NewForConfigOrDie(cp.restConfig(adminToken))
	_, err = admin.StorageV1().StorageClasses().Create(context.Background(), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "standard",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "example.com/none", // nothing provisions: the claims are dry runs
		VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func ptr[T any](v T) *T { return &v }

// requiredAdmission are the plugins the manifests are judged by; the API
// server's log must list each as loaded (a flag that stopped working, or a
// default that changed, fails here instead of passing silently).
var requiredAdmission = append([]string{
	"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "PodSecurity",
	"DefaultStorageClass", "ResourceQuota", "StorageObjectInUseProtection",
	"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ValidatingAdmissionPolicy",
}, extraAdmissionPlugins...)

// loadedPlugins matches kube-apiserver's log line naming the admission
// plugins of each kind in order.
var loadedPlugins = regexp.MustCompile(`Loaded \d+ (?:mutating|validating) admission controller\(s\) successfully in the following order: ([A-Za-z,]+)`)

func checkAdmissionPlugins(t *testing.T, cp *controlPlane) {
	b, err := os.ReadFile(filepath.Join(cp.dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, m := range loadedPlugins.FindAllStringSubmatch(string(b), -1) {
		for p := range strings.SplitSeq(m[1], ",") {
			loaded[p] = true
		}
	}
	var missing []string
	for _, p := range requiredAdmission {
		if !loaded[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("kube-apiserver did not load admission plugins %v; it loaded %v", missing, slices.Sorted(maps.Keys(loaded)))
	}
	t.Logf("admission plugins loaded: %d, among them %s", len(loaded), strings.Join(requiredAdmission, ", "))
}

// tenantNamespace makes namespace ns as a tenant's namespace is often set
// up: a ResourceQuota on requests and limits of CPU and memory (so every
// container, sidecars included, must declare both), on storage and on
// the count of pods and claims, and a LimitRange bounding one pod.
// No quota controller runs, so the quota's status is written as that
// controller would (nothing used yet): quota admission checks a pod's
// totals against the status's hard limits and usage, and without a status
// only checks that every container declares what the quota counts.
func tenantNamespace(t *testing.T, admin kubernetes.Interface, ns string) {
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hard := corev1.ResourceList{
		corev1.ResourcePods:                   resource.MustParse("10"),
		corev1.ResourceRequestsCPU:            resource.MustParse("2"),
		corev1.ResourceRequestsMemory:         resource.MustParse("2Gi"),
		corev1.ResourceLimitsCPU:              resource.MustParse("8"),
		corev1.ResourceLimitsMemory:           resource.MustParse("4Gi"),
		corev1.ResourceRequestsStorage:        resource.MustParse("10Gi"),
		corev1.ResourcePersistentVolumeClaims: resource.MustParse("10"),
	}
	q, err := admin.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := corev1.ResourceList{}
	for name := range hard {
		used[name] = resource.MustParse("0")
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	if _, err := admin.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			// Per pod, sidecars included. Not per container: a
			// container's max becomes every container's default limit,
			// which would hide a container that declares none.
			Type: corev1.LimitTypePod,
			Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// applyOverlay builds the kustomization in dir and applies it into a new
// tenant namespace ns; it returns every finding, and what the dry runs
// (the controllers' objects) would have created.
func applyOverlay(t *testing.T, cp *controlPlane, dir, ns string) (findings []string, dryRuns []*unstructured.Unstructured) {
	objs, err := kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s: kustomize built no objects", dir)
	}
	tenantNamespace(t, kubernetes.NewForConfigOrDie(cp.restConfig(adminToken)), ns)
	a := newApplier(t, cp.restConfig(adminToken), ns)
	findings, dryRuns = a.applyAll(objs)
	findings = append(findings, a.strayWarnings()...)
	t.Logf("%s: %d objects applied into namespace %s, %d dry runs of their controllers' objects, %d findings",
		filepath.Base(dir), len(objs), ns, len(dryRuns), len(findings))
	return findings, dryRuns
}

// checkAdmitted checks that the dry runs went through mutating admission,
// as a created pod and claim would (a dry run that skipped admission would
// make the test blind to it): AlwaysPullImages set every container's pull
// policy, DefaultStorageClass every claim's class. And that the
// StatefulSet's three pods were among them.
func checkAdmitted(t *testing.T, dryRuns []*unstructured.Unstructured) {
	pods := 0
	for _, u := range dryRuns {
		switch u.GetKind() {
		case "Pod":
			pods++
			var pod corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
				t.Fatal(err)
			}
			for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
				if c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("%s: container %s has imagePullPolicy %s after admission; AlwaysPullImages sets Always", objectName(u), c.Name, c.ImagePullPolicy)
				}
			}
		case "PersistentVolumeClaim":
			if class, _, _ := unstructured.NestedString(u.Object, "spec", "storageClassName"); class != "standard" {
				t.Errorf("%s: storageClassName %q after admission; DefaultStorageClass sets the default, standard", objectName(u), class)
			}
		}
	}
	if pods != 3 {
		t.Errorf("%d pods went through admission; the StatefulSet has 3", pods)
	}
}

// brokenCases are the variants in testdata/broken, each an overlay with
// one mistake, and what the API server must be found to say about it
// (each string in some finding).
var brokenCases = map[string][]string{
	// The app container may escalate privileges: PodSecurity restricted
	// warns on the StatefulSet and refuses its pods.
	"podsecurity": {
		`StatefulSet broken-podsecurity/my-app: warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app"`,
		`Pod broken-podsecurity/my-app-0 (dry run): rejected: pods "my-app-0" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app"`,
	},
	// A misspelt field, which a client that decodes loosely drops.
	"unknown-field": {
		`StatefulSet broken-unknown-field/my-app: rejected: `,
		`.spec.template.spec.initContainers[name="electord"].securityContext.readOnlyRootFileSystem: field not declared in schema`,
	},
	// A value the schema allows and validation refuses: both
	// maxUnavailable (the base's) and minAvailable.
	"invalid": {
		`PodDisruptionBudget broken-invalid/my-app: rejected: PodDisruptionBudget.policy "my-app" is invalid: spec: Invalid value: `,
		`: minAvailable and maxUnavailable cannot be both set`,
	},
	// Accepted with a warning only: 32m of memory is 0.032 bytes.
	"warning": {
		`StatefulSet broken-warning/my-app: warning: spec.template.spec.containers[0].resources.requests[memory]: fractional byte value "32m" is invalid, must be an integer`,
		`Pod broken-warning/my-app-0 (dry run): warning: spec.containers[0].resources.requests[memory]: fractional byte value "32m" is invalid, must be an integer`,
	},
	// A kind whose pods the test cannot make (a Deployment's).
	"unchecked-kind": {
		`Deployment broken-unchecked-kind/other: has a pod template, and this test makes pods for StatefulSets only`,
	},
	// A container without limits: the namespace's quota refuses the pods.
	"quota": {
		`Pod broken-quota/my-app-0 (dry run): rejected: pods "my-app-0" is forbidden: failed quota: tenant: must specify limits.cpu for: app`,
	},
}

// TestManifestsApply applies every overlay (and shows on broken variants
// that each kind of finding fails: one API server for all).
func TestManifestsApply(t *testing.T) {
	cp := manifestsControlPlane(t)
	overlays, err := filepath.Glob(filepath.Join("..", "..", "deploy", "k8s", "overlays", "*", "kustomization.yaml"))
	if err != nil || len(overlays) < 3 {
		t.Fatalf("want the plain, secure and named overlays under deploy/k8s/overlays, found %v (%v)", overlays, err)
	}
	for _, k := range overlays {
		dir := filepath.Dir(k)
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			findings, dryRuns := applyOverlay(t, cp, dir, "overlay-"+name)
			for _, f := range findings {
				t.Error(f)
			}
			checkAdmitted(t, dryRuns)
		})
	}
	t.Run("catches", func(t *testing.T) {
		dirs, err := filepath.Glob(filepath.Join("testdata", "broken", "*", "kustomization.yaml"))
		if err != nil || len(dirs) != len(brokenCases) {
			t.Fatalf("testdata/broken holds %v, want one directory for each of the %d cases (%v)", dirs, len(brokenCases), err)
		}
		for _, k := range dirs {
			dir := filepath.Dir(k)
			name := filepath.Base(dir)
			t.Run(name, func(t *testing.T) {
				want, ok := brokenCases[name]
				if !ok {
					t.Fatalf("%s: no case in brokenCases", dir)
				}
				findings, _ := applyOverlay(t, cp, dir, "broken-"+name)
				all := strings.Join(findings, "\n")
				t.Logf("the findings:\n%s", all)
				for _, w := range want {
					if !strings.Contains(all, w) {
						t.Errorf("no finding says %q; the findings:\n%s", w, all)
					}
				}
			})
		}
	})
}
