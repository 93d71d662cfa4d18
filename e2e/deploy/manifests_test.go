package deploy

// The manifests as a cluster would receive them: every overlay under
// deploy/k8s/overlays built with kustomize (the library kubectl apply -k
// uses) and every object decoded strictly into k8s.io/api types, so a
// misspelt or misplaced field fails here instead of being dropped by the
// API server. Then what issue 13 asks of a hardened pod is checked on the
// decoded objects; TestChecksCatch shows each check failing on a manifest
// that breaks it.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/electord/electord/config"
)

// repoRoot is the product module's directory (this module's ../..).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "k8s", "base", "kustomization.yaml")); err != nil {
		t.Fatalf("deploy/k8s/base not found from %s: %v", root, err)
	}
	return root
}

// overlays lists deploy/k8s/overlays/*.
func overlays(t testing.TB) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", "*", "kustomization.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no overlays under deploy/k8s/overlays (%v)", err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

// manifests is one overlay's build, decoded.
type manifests struct {
	StatefulSets    []*appsv1.StatefulSet
	Services        []*corev1.Service
	ServiceAccounts []*corev1.ServiceAccount
	PDBs            []*policyv1.PodDisruptionBudget
	NetworkPolicies []*networkingv1.NetworkPolicy
	Roles           []*rbacv1.Role
	RoleBindings    []*rbacv1.RoleBinding
	ClusterRoles    []*rbacv1.ClusterRole
	ClusterBindings []*rbacv1.ClusterRoleBinding
}

// kustomize builds the kustomization in dir as kubectl apply -k would.
func kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return res.AsYaml()
}

// kinds are the objects an overlay may hold: each adds a new one of its
// type to the manifests and returns it to decode into.
var kinds = map[string]func(m *manifests) any{
	"apps/v1 StatefulSet":                             func(m *manifests) any { return add(&m.StatefulSets) },
	"v1 Service":                                      func(m *manifests) any { return add(&m.Services) },
	"v1 ServiceAccount":                               func(m *manifests) any { return add(&m.ServiceAccounts) },
	"policy/v1 PodDisruptionBudget":                   func(m *manifests) any { return add(&m.PDBs) },
	"networking.k8s.io/v1 NetworkPolicy":              func(m *manifests) any { return add(&m.NetworkPolicies) },
	"rbac.authorization.k8s.io/v1 Role":               func(m *manifests) any { return add(&m.Roles) },
	"rbac.authorization.k8s.io/v1 RoleBinding":        func(m *manifests) any { return add(&m.RoleBindings) },
	"rbac.authorization.k8s.io/v1 ClusterRole":        func(m *manifests) any { return add(&m.ClusterRoles) },
	"rbac.authorization.k8s.io/v1 ClusterRoleBinding": func(m *manifests) any { return add(&m.ClusterBindings) },
}

func add[T any](list *[]*T) *T {
	o := new(T)
	*list = append(*list, o)
	return o
}

// decode splits a multi-document YAML stream and decodes every object
// strictly (unknown or duplicate fields are errors) into its k8s.io/api
// type; a kind this package does not know is an error too.
func decode(stream []byte) (*manifests, error) {
	m := &manifests{}
	for i, doc := range bytes.Split(stream, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		kind := kinds[head.APIVersion+" "+head.Kind]
		if kind == nil {
			return nil, fmt.Errorf("document %d: unexpected %s %s", i, head.APIVersion, head.Kind)
		}
		obj := kind(m)
		if err := strictUnmarshal(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
	}
	return m, nil
}

// strictUnmarshal decodes as the API server's strict field validation
// does: unknown and duplicate fields are errors, and field names are
// case-sensitive (encoding/json, under sigs.k8s.io/yaml.UnmarshalStrict,
// would take readOnlyRootFileSystem for readOnlyRootFilesystem).
func strictUnmarshal(doc []byte, obj any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// build kustomizes and decodes one overlay.
func build(t testing.TB, dir string) *manifests {
	t.Helper()
	out, err := kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(out)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return m
}

func TestOverlaysBuildAndPass(t *testing.T) {
	for _, dir := range overlays(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m := build(t, dir)
			for _, err := range check(m) {
				t.Error(err)
			}
			secure := filepath.Base(dir) == "secure"
			for _, err := range checkSecurity(m, secure) {
				t.Error(err)
			}
			if secure {
				for _, err := range checkCertificateExample(m, filepath.Join(dir, "certificate-example.yaml")) {
					t.Error(err)
				}
			}
		})
	}
}

// TestNamedElectionWithSecure: the named-election component composes with
// the secure overlay too, as docs/KUBERNETES.md tells those who want both
// to do (a copy of overlays/secure with the component).
func TestNamedElectionWithSecure(t *testing.T) {
	k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
	dir := t.TempDir()
	rel := func(path string) string { // kustomize refuses absolute roots
		r, err := filepath.Rel(dir, path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kust := fmt.Sprintf("resources:\n  - %s\ncomponents:\n  - %s\n",
		rel(filepath.Join(k8s, "overlays", "secure")), rel(filepath.Join(k8s, "components", "named-election")))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	m := build(t, dir)
	for _, err := range append(check(m), checkSecurity(m, true)...) {
		t.Error(err)
	}
	if p, err := findPod(m); err != nil || p.flags["k8s-leader-election"] != "my-app" {
		t.Errorf("secure with the named-election component: --k8s-leader-election %q (%v), want my-app", p.flags["k8s-leader-election"], err)
	}
}

func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	out, err := kustomize(filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", "plain"))
	if err != nil {
		t.Fatal(err)
	}
	// readOnlyRootFileSystem (capital S) is a typo kubectl apply would drop
	// with a warning, leaving the root file system writable.
	bad := bytes.Replace(out, []byte("readOnlyRootFilesystem:"), []byte("readOnlyRootFileSystem:"), 1)
	if bytes.Equal(bad, out) {
		t.Fatal("no readOnlyRootFilesystem in the plain overlay")
	}
	if _, err := decode(bad); err == nil || !strings.Contains(err.Error(), "readOnlyRootFileSystem") {
		t.Fatalf("decoding a misspelt field: got %v, want an error naming it", err)
	}
}

// pod is the StatefulSet's pod template and its electord sidecar.
type pod struct {
	sts      *appsv1.StatefulSet
	spec     *corev1.PodSpec
	electord *corev1.Container
	flags    map[string]string // electord's --name=value arguments ("" for a bare --name)
}

func findPod(m *manifests) (*pod, error) {
	if len(m.StatefulSets) != 1 {
		return nil, fmt.Errorf("want one StatefulSet, got %d", len(m.StatefulSets))
	}
	p := &pod{sts: m.StatefulSets[0], spec: &m.StatefulSets[0].Spec.Template.Spec, flags: map[string]string{}}
	for i := range p.spec.Containers {
		if p.spec.Containers[i].Name == "electord" {
			return nil, fmt.Errorf("electord is a regular container: it must be a native sidecar (an init container with restartPolicy: Always)")
		}
	}
	for i := range p.spec.InitContainers {
		if p.spec.InitContainers[i].Name == "electord" {
			p.electord = &p.spec.InitContainers[i]
		}
	}
	if p.electord == nil {
		return nil, fmt.Errorf("no electord init container in StatefulSet %s", p.sts.Name)
	}
	for _, a := range append(slices.Clone(p.electord.Command), p.electord.Args...) {
		name, val, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("electord argument %q: write every flag as --name=value", a)
		}
		p.flags[name] = val
	}
	return p, nil
}

// containers is every container of the pod, init containers first.
func (p *pod) containers() []*corev1.Container {
	var out []*corev1.Container
	for i := range p.spec.InitContainers {
		out = append(out, &p.spec.InitContainers[i])
	}
	for i := range p.spec.Containers {
		out = append(out, &p.spec.Containers[i])
	}
	return out
}

// port resolves a probe's port (a number or a name of c's ports).
func port(c *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// flagPort is the port of a host:port flag.
func flagPort(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// check asserts the hardened pod: everything issue 13 item 3 lists.
func check(m *manifests) (errs []error) {
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	p, err := findPod(m)
	if err != nil {
		return []error{err}
	}
	if p.electord.RestartPolicy == nil || *p.electord.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		bad("electord: not a native sidecar: restartPolicy must be Always")
	}
	labels := p.sts.Spec.Template.Labels

	// The pod runs as 65532 with the volume the pod's group's.
	sc := p.spec.SecurityContext
	if sc == nil {
		bad("pod: no securityContext")
		sc = &corev1.PodSecurityContext{}
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		bad("pod: runAsNonRoot is not true")
	}
	for name, v := range map[string]*int64{"runAsUser": sc.RunAsUser, "runAsGroup": sc.RunAsGroup, "fsGroup": sc.FSGroup} {
		if v == nil || *v != 65532 {
			bad("pod: %s must be 65532 (the image's user), got %v", name, deref(v))
		}
	}
	if p.spec.TerminationGracePeriodSeconds == nil || *p.spec.TerminationGracePeriodSeconds < 5 {
		bad("pod: terminationGracePeriodSeconds must be set (at least 5 s for a SIGTERM handover)")
	}
	for _, c := range p.containers() {
		csc := c.SecurityContext
		if csc == nil {
			bad("%s: no securityContext", c.Name)
			continue
		}
		if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			bad("%s: readOnlyRootFilesystem is not true", c.Name)
		}
		if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			bad("%s: allowPrivilegeEscalation is not false", c.Name)
		}
		if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
			bad("%s: capabilities must drop ALL and add none", c.Name)
		}
		if csc.RunAsUser != nil && *csc.RunAsUser == 0 || csc.RunAsNonRoot != nil && !*csc.RunAsNonRoot || csc.Privileged != nil && *csc.Privileged {
			bad("%s: overrides the pod's non-root user", c.Name)
		}
		seccomp := sc.SeccompProfile
		if csc.SeccompProfile != nil {
			seccomp = csc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad("%s: seccompProfile is not RuntimeDefault", c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okr := c.Resources.Requests[r]
			lim, okl := c.Resources.Limits[r]
			if !okr || !okl || req.IsZero() || lim.Cmp(req) < 0 {
				bad("%s: %s needs a request and a limit no lower than it (requests %v, limits %v)", c.Name, r, c.Resources.Requests, c.Resources.Limits)
			}
		}
	}

	// Probes on the health address, not on leadership.
	health := flagPort(p.flags["health-addr"])
	if h, _, _ := net.SplitHostPort(p.flags["health-addr"]); health == "" || h != "0.0.0.0" {
		bad("electord: --health-addr must listen on 0.0.0.0 for the kubelet's probes, got %q", p.flags["health-addr"])
	}
	probes := map[string]*corev1.Probe{"readinessProbe": p.electord.ReadinessProbe, "livenessProbe": p.electord.LivenessProbe, "startupProbe": p.electord.StartupProbe}
	for name, want := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/livez"} {
		if probes[name] == nil {
			bad("electord: no %s", name)
		}
		if probes[name] != nil && probes[name].HTTPGet != nil && probes[name].HTTPGet.Path != want {
			bad("electord: %s must GET %s, got %s", name, want, probes[name].HTTPGet.Path)
		}
	}
	for _, c := range p.containers() {
		for name, pr := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe} {
			if pr == nil {
				continue
			}
			if pr.HTTPGet == nil {
				bad("%s: %s must be an HTTP GET on the health address", c.Name, name)
				continue
			}
			if strings.HasPrefix(pr.HTTPGet.Path, "/leader") || strings.HasPrefix(pr.HTTPGet.Path, "/watch") {
				bad("%s: %s GETs %s: probes must not depend on leadership (only the leader would be Ready)", c.Name, name, pr.HTTPGet.Path)
			}
			if c == p.electord && fmt.Sprint(port(c, pr.HTTPGet.Port)) != health {
				bad("electord: %s probes port %s, not the health address %q", name, pr.HTTPGet.Port.String(), p.flags["health-addr"])
			}
		}
	}

	// What must be reachable is, the rest listens on localhost. The api
	// may listen on every address with TLS (the secure overlay: mutual TLS
	// and the admin role guard it; checkNetworkPolicy the port).
	if h, _, err := net.SplitHostPort(p.flags["http-addr"]); err != nil || !net.ParseIP(h).IsLoopback() {
		bad("electord: --http-addr must listen on localhost (inside the pod only), got %q", p.flags["http-addr"])
	}
	if h, _, err := net.SplitHostPort(p.flags["api-addr"]); err != nil || !net.ParseIP(h).IsLoopback() && (p.flags["tls-cert"] == "" || !wildcard(h)) {
		bad("electord: --api-addr must listen on localhost (inside the pod only), or on every address (kubectl port-forward dials localhost) with TLS, got %q", p.flags["api-addr"])
	}
	// [$(POD_IP)]:port, bracketed: a bare $(POD_IP):7071 becomes
	// fd00::5:7071 on an IPv6 cluster, which is not host:port (checkFlags
	// parses both families).
	for _, k := range []string{"peer-addr", "gossip-addr"} {
		if !strings.HasPrefix(p.flags[k], "[$(POD_IP)]:") {
			bad("electord: --%s must listen on the pod IP, written [$(POD_IP)]:port for IPv4 and IPv6, got %q", k, p.flags[k])
		}
	}
	errs = append(errs, checkToken(p)...)
	env := map[string]string{}
	for _, e := range p.electord.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for k, want := range map[string]string{"k8s-pod-name": "metadata.name", "k8s-pod-ip": "status.podIP", "k8s-namespace": "metadata.namespace"} {
		v, ok := p.flags[k]
		if !ok || !strings.HasPrefix(v, "$(") || env[strings.Trim(v, "$()")] != want {
			bad("electord: --%s must come from the downward API (%s), got %q", k, want, v)
		}
	}
	for _, f := range p.flags {
		for _, ref := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(f, -1) {
			if _, ok := env[ref[1]]; !ok {
				bad("electord: an argument uses $(%s), which is not in its env", ref[1])
			}
		}
	}

	// The Services: the leader's is selector-less, the peers' headless.
	svcs := map[string]*corev1.Service{}
	for _, s := range m.Services {
		svcs[s.Name] = s
	}
	if want := p.sts.Name + "-leader"; p.flags["k8s-leader-service"] != want {
		bad("electord: --k8s-leader-service must be %s, got %q", want, p.flags["k8s-leader-service"])
	} else if s := svcs[want]; s == nil || len(s.Spec.Selector) > 0 {
		bad("Service %s: missing, or has a selector (the leader writes its EndpointSlice)", want)
	}
	errs = append(errs, checkElection(p)...)
	if s := svcs[p.sts.Spec.ServiceName]; s == nil || s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses || !selects(s.Spec.Selector, labels) {
		bad("Service %s (serviceName): missing, not headless, not publishing not-ready pods or not selecting the pods", p.sts.Spec.ServiceName)
	} else if !strings.HasPrefix(p.flags["join"], s.Name+".") {
		bad("electord: --join must name the headless Service %s, got %q", s.Name, p.flags["join"])
	}

	// A PodDisruptionBudget that keeps a majority.
	ok := false
	for _, pdb := range m.PDBs {
		if pdb.Spec.Selector != nil && selects(pdb.Spec.Selector.MatchLabels, labels) && len(pdb.Spec.Selector.MatchExpressions) == 0 &&
			(pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 1 ||
				pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int && int(pdb.Spec.MinAvailable.IntVal) > int(deref32(p.sts.Spec.Replicas))/2) {
			ok = true
		}
	}
	if !ok {
		bad("no PodDisruptionBudget selecting the pods that keeps a majority (maxUnavailable: 1)")
	}

	errs = append(errs, checkNetworkPolicy(m, labels, p.flags)...)
	errs = append(errs, checkRBAC(m, p.spec.ServiceAccountName)...)
	errs = append(errs, checkFlags(p)...)
	return errs
}

// checkElection: the app follows the election the leader Service follows,
// through the sidecar in its pod (else the Service would name nobody, or a
// pod whose app does not lead). Either the node's own election in quorum
// mode, a majority of the replicas to lead (the default: a partitioned
// minority has no leader), polled at LEADER_URL; or, with
// --k8s-leader-election (the named overlay), the app campaigns in that
// election at CAMPAIGN_URL, also in quorum mode (every node votes in a
// named election).
func checkElection(p *pod) (errs []error) {
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	env := map[string]string{}
	if len(p.spec.Containers) > 0 {
		for _, e := range p.spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
	}
	sidecar := "http://" + p.flags["http-addr"]
	if want := fmt.Sprint(deref32(p.sts.Spec.Replicas)); p.flags["quorum"] != want {
		bad("electord: --quorum must be %s, the replicas: without quorum mode a partitioned minority elects a leader of its own; got %q", want, p.flags["quorum"])
	}
	if el := p.flags["k8s-leader-election"]; el != "" {
		if want := sidecar + "/elections/" + el + "/campaign"; env["CAMPAIGN_URL"] != want {
			bad("app: CAMPAIGN_URL must be %s (the sidecar's campaign in the election the Service follows), got %q", want, env["CAMPAIGN_URL"])
		}
		return errs
	}
	if env["CAMPAIGN_URL"] != "" {
		bad("app: CAMPAIGN_URL is set, but the leader Service follows the node's own election (no --k8s-leader-election)")
	}
	if want := sidecar + "/leader/self"; env["LEADER_URL"] != want {
		bad("app: LEADER_URL must be %s (whether its node leads the election the Service follows), got %q", want, env["LEADER_URL"])
	}
	return errs
}

// wildcard: host is every address (0.0.0.0 listens on both families in Go).
func wildcard(h string) bool { ip := net.ParseIP(h); return ip != nil && ip.IsUnspecified() }

// checkNetworkPolicy: only the app's pods reach the peer and gossip ports
// (and the api, when it listens beyond localhost, which they must reach);
// the health port is not open to every pod: only to namespaces chosen by a
// label (the kubelet's probes come from the node, which NetworkPolicy
// always lets through).
func checkNetworkPolicy(m *manifests, labels map[string]string, flags map[string]string) (errs []error) {
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	type port struct {
		proto corev1.Protocol
		num   string
	}
	guarded := []port{{corev1.ProtocolTCP, flagPort(flags["peer-addr"])}, {corev1.ProtocolTCP, flagPort(flags["gossip-addr"])}, {corev1.ProtocolUDP, flagPort(flags["gossip-addr"])}}
	api := port{corev1.ProtocolTCP, flagPort(flags["api-addr"])}
	apiExposed := false
	if h, _, err := net.SplitHostPort(flags["api-addr"]); err == nil && !net.ParseIP(h).IsLoopback() {
		apiExposed = true
		guarded = append(guarded, api)
	}
	health := port{corev1.ProtocolTCP, flagPort(flags["health-addr"])}
	admits := func(rule networkingv1.NetworkPolicyIngressRule, g port) bool {
		ok := len(rule.Ports) == 0
		for _, rp := range rule.Ports {
			proto := corev1.ProtocolTCP
			if rp.Protocol != nil {
				proto = *rp.Protocol
			}
			if proto == g.proto && (rp.Port == nil || rp.Port.String() == g.num) {
				ok = true
			}
		}
		return ok
	}
	appPods := func(peer networkingv1.NetworkPolicyPeer) bool {
		return peer.IPBlock == nil && peer.NamespaceSelector == nil && peer.PodSelector != nil &&
			len(peer.PodSelector.MatchExpressions) == 0 && len(peer.PodSelector.MatchLabels) > 0 && selects(labels, peer.PodSelector.MatchLabels)
	}
	covering, apiReached, monitoring := 0, false, false
	for _, np := range m.NetworkPolicies {
		if len(np.Spec.PodSelector.MatchExpressions) > 0 || !selects(np.Spec.PodSelector.MatchLabels, labels) ||
			!slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		covering++
		for i, rule := range np.Spec.Ingress {
			for _, g := range append(guarded, health) {
				if !admits(rule, g) {
					continue
				}
				if len(rule.From) == 0 {
					bad("NetworkPolicy %s: ingress rule %d admits %s %s from anywhere", np.Name, i, g.proto, g.num)
				}
				for _, peer := range rule.From {
					switch {
					case appPods(peer):
						if g == api {
							apiReached = true
						}
					case g != health:
						bad("NetworkPolicy %s: ingress rule %d admits %s %s from more than the app's pods", np.Name, i, g.proto, g.num)
					case peer.IPBlock != nil:
						bad("NetworkPolicy %s: ingress rule %d admits the health port %s from an ipBlock: probes come from the node, which NetworkPolicy always admits", np.Name, i, g.num)
					case peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchExpressions) > 0 || len(peer.NamespaceSelector.MatchLabels) == 0:
						bad("NetworkPolicy %s: ingress rule %d admits the health port %s from every pod (of this or every namespace): want namespaces chosen by a label", np.Name, i, g.num)
					case peer.PodSelector == nil || len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0:
						monitoring = true
					}
				}
			}
		}
	}
	if covering == 0 {
		bad("no NetworkPolicy with an Ingress policy selects the pods: the peer and gossip ports are open to all")
	}
	if covering > 0 && !monitoring {
		bad("no NetworkPolicy rule admits the health port %s from a monitoring namespace (a namespaceSelector by label): Prometheus cannot scrape", health.num)
	}
	if apiExposed && !apiReached {
		bad("the api port %s listens beyond localhost but no NetworkPolicy rule admits it from the app's pods: forwarding and the status page cannot reach it", api.num)
	}
	return errs
}

// checkToken: the service-account token reaches the electord container
// only. The pod does not automount it (that would give every container,
// the app too, API credentials); electord mounts a projected token, the
// cluster CA and the namespace where client-go's in-cluster config reads
// them.
func checkToken(p *pod) (errs []error) {
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if a := p.spec.AutomountServiceAccountToken; a == nil || *a {
		bad("pod: automountServiceAccountToken must be false (else every container, the app too, gets the token)")
	}
	tokenVolume := func(name string) *corev1.ProjectedVolumeSource {
		for _, v := range p.spec.Volumes {
			if v.Name == name && v.Projected != nil {
				return v.Projected
			}
		}
		return nil
	}
	hasToken := func(pv *corev1.ProjectedVolumeSource) bool {
		return pv != nil && slices.ContainsFunc(pv.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil })
	}
	for _, c := range p.containers() {
		for _, vm := range c.VolumeMounts {
			if c != p.electord && (hasToken(tokenVolume(vm.Name)) || strings.HasPrefix(vm.MountPath, "/var/run/secrets/kubernetes.io")) {
				bad("%s: mounts the service-account token (volume %s at %s): only electord may", c.Name, vm.Name, vm.MountPath)
			}
		}
	}
	var pv *corev1.ProjectedVolumeSource
	for _, vm := range p.electord.VolumeMounts {
		if strings.TrimSuffix(vm.MountPath, "/") == dir && vm.ReadOnly && vm.SubPath == "" {
			pv = tokenVolume(vm.Name)
		}
	}
	if pv == nil {
		return append(errs, fmt.Errorf("electord: no service-account token: want a read-only projected volume at %s", dir))
	}
	token, ca, ns := false, false, false
	for _, s := range pv.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			token = s.ServiceAccountToken.Path == "token" && s.ServiceAccountToken.Audience == ""
		case s.ConfigMap != nil:
			ca = s.ConfigMap.Name == "kube-root-ca.crt" && slices.Contains(s.ConfigMap.Items, corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"})
		case s.DownwardAPI != nil:
			ns = slices.ContainsFunc(s.DownwardAPI.Items, func(f corev1.DownwardAPIVolumeFile) bool {
				return f.Path == "namespace" && f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace"
			})
		}
	}
	if !token || !ca || !ns {
		bad("electord: the service-account volume at %s must hold token (serviceAccountToken, the API server's audience), ca.crt (configMap kube-root-ca.crt) and namespace (downward API): token %v, ca.crt %v, namespace %v", dir, token, ca, ns)
	}
	return errs
}

// checkRBAC: the pod's service account may get, create and update
// EndpointSlices and get Services, nothing more, in its namespace only.
func checkRBAC(m *manifests, sa string) (errs []error) {
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	allowed := map[string][]string{"discovery.k8s.io/endpointslices": {"get", "create", "update"}, "/services": {"get"}}
	if sa == "" || sa == "default" {
		bad("pod: serviceAccountName must name electord's own account, got %q", sa)
	}
	if !slices.ContainsFunc(m.ServiceAccounts, func(s *corev1.ServiceAccount) bool { return s.Name == sa }) {
		bad("ServiceAccount %s is not in the build", sa)
	}
	if len(m.ClusterRoles)+len(m.ClusterBindings) > 0 {
		bad("cluster-wide RBAC (ClusterRole or ClusterRoleBinding): the EndpointSlice writer needs its namespace only")
	}
	roles := map[string]*rbacv1.Role{}
	for _, r := range m.Roles {
		roles[r.Name] = r
	}
	granted := map[string]bool{}
	for _, b := range m.RoleBindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == sa }) {
			continue
		}
		r := roles[b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || r == nil {
			bad("RoleBinding %s: binds %s %s, not a Role of the build", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		for _, rule := range r.Rules {
			if len(rule.NonResourceURLs) > 0 {
				bad("Role %s: non-resource URLs %v", r.Name, rule.NonResourceURLs)
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if !slices.Contains(allowed[g+"/"+res], v) {
							bad("Role %s: %s %s/%s is more than the EndpointSlice writer needs", r.Name, v, g, res)
						}
						granted[g+"/"+res+" "+v] = true
					}
				}
			}
		}
	}
	for gr, verbs := range allowed {
		for _, v := range verbs {
			if !granted[gr+" "+v] {
				bad("ServiceAccount %s may not %s %s, which the EndpointSlice writer needs", sa, v, gr)
			}
		}
	}
	return errs
}

// checkFlags: every argument the manifest gives electord is one of its
// flags (config.Register) and parses with the downward-API values in.
func checkFlags(p *pod) (errs []error) {
	fs := pflag.NewFlagSet("electord", pflag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	config.Register(fs)
	raw := append(slices.Clone(p.electord.Command), p.electord.Args...)
	for _, a := range raw {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if fs.Lookup(name) == nil {
			errs = append(errs, fmt.Errorf("electord: the manifest passes --%s, which electord does not have", name))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// Then as electord reads and validates them, with an IPv4 and an IPv6
	// pod IP (--id given: the test's hostname is not a pod's).
	for _, ip := range []string{"10.0.0.10", "fd00::a"} {
		fs := pflag.NewFlagSet("electord", pflag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		config.Register(fs)
		args := expand(raw, map[string]string{"POD_NAME": "my-app-0", "POD_IP": ip, "POD_NAMESPACE": "default"})
		if err := fs.Parse(append(args, "--id=1")); err != nil {
			return append(errs, fmt.Errorf("electord: the manifest's arguments do not parse: %w", err))
		}
		cfg, err := config.Load(fs)
		if err == nil {
			cfg.DataDir = "" // the pod's volume, not this machine's
			err = cfg.Validate()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("electord: with pod IP %s the manifest's arguments are refused: %w", ip, err))
		}
	}
	return errs
}

// checkSecurity: the plain overlay says --insecure out loud; the secure one
// has TLS files and a gossip key from Secrets, read-only, and no --insecure.
func checkSecurity(m *manifests, secure bool) (errs []error) {
	p, err := findPod(m)
	if err != nil {
		return []error{err}
	}
	_, insecure := p.flags["insecure"]
	if !secure {
		if !insecure {
			errs = append(errs, fmt.Errorf("plain overlay: the peer and gossip ports are exposed without TLS: electord refuses to start without --insecure"))
		}
		return errs
	}
	if insecure {
		errs = append(errs, fmt.Errorf("secure overlay: passes --insecure"))
	}
	for _, k := range []string{"tls-cert", "tls-key", "tls-ca", "gossip-key-file"} {
		if err := fromSecret(p, p.flags[k]); err != nil {
			errs = append(errs, fmt.Errorf("secure overlay: --%s: %w", k, err))
		}
	}
	if p.flags["cluster"] == "" {
		errs = append(errs, fmt.Errorf("secure overlay: no --cluster"))
	}
	if h, _, err := net.SplitHostPort(p.flags["api-addr"]); err != nil || net.ParseIP(h).IsLoopback() {
		errs = append(errs, fmt.Errorf("secure overlay: --api-addr %q is on localhost: every member advertises it, so a follower cannot forward commands and the status page cannot ask other pods", p.flags["api-addr"]))
	}
	return errs
}

// fromSecret: file lies on a read-only mount of a volume made of Secrets only.
func fromSecret(p *pod, file string) error {
	if file == "" {
		return fmt.Errorf("not set")
	}
	for _, vm := range p.electord.VolumeMounts {
		if !strings.HasPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			continue
		}
		if !vm.ReadOnly {
			return fmt.Errorf("%s is mounted read-write", vm.MountPath)
		}
		for _, v := range p.spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			if v.Secret != nil {
				return nil
			}
			if v.Projected != nil && !slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.Secret == nil }) {
				return nil
			}
			return fmt.Errorf("volume %s is not made of Secrets", v.Name)
		}
		return fmt.Errorf("no volume %s", vm.Name)
	}
	return fmt.Errorf("%s is on no volume mount", file)
}

// checkCertificateExample: the cert-manager example issues, for each pod,
// the node certificate its --tls-cert names, in a Secret the pod mounts.
func checkCertificateExample(m *manifests, file string) (errs []error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return []error{err}
	}
	p, err := findPod(m)
	if err != nil {
		return []error{err}
	}
	mounted := map[string]bool{}
	for _, v := range p.spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					mounted[s.Secret.Name] = true
				}
			}
		}
	}
	type certificate struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			SecretName string   `json:"secretName"`
			URIs       []string `json:"uris"`
			Usages     []string `json:"usages"`
		}
	}
	certs := map[string]certificate{}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var c certificate
		if err := yaml.Unmarshal(doc, &c); err != nil {
			return []error{fmt.Errorf("%s: %w", file, err)}
		}
		if c.Kind == "Certificate" {
			certs[c.Spec.SecretName] = c
		}
	}
	for i := range int(deref32(p.sts.Spec.Replicas)) {
		secret := fmt.Sprintf("%s-%d-tls", p.sts.Name, i)
		c, ok := certs[secret]
		want := fmt.Sprintf("spiffe://%s/node/%d", p.flags["cluster"], i+1)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: no Certificate writes %s", file, secret))
		case !slices.Equal(c.Spec.URIs, []string{want}):
			errs = append(errs, fmt.Errorf("%s: Certificate %s names %v, want %s (--id-from-hostname gives ordinal+1)", file, c.Metadata.Name, c.Spec.URIs, want))
		case !slices.Contains(c.Spec.Usages, "server auth") || !slices.Contains(c.Spec.Usages, "client auth"):
			errs = append(errs, fmt.Errorf("%s: Certificate %s: a node certificate needs server auth and client auth", file, c.Metadata.Name))
		}
		if !mounted[secret] {
			errs = append(errs, fmt.Errorf("secure overlay: Secret %s is not mounted", secret))
		}
	}
	return errs
}

// selects reports whether a selector's labels all appear in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// expand replaces $(NAME) as the kubelet does in a container's arguments.
func expand(args []string, env map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		out[i] = a
	}
	return out
}

func deref(v *int64) any {
	if v == nil {
		return "unset"
	}
	return *v
}

func deref32(v *int32) int32 {
	if v == nil {
		return 1
	}
	return *v
}
