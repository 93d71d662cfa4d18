package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChecksCatch breaks the plain overlay one way at a time, as the
// manifests were before issue 13 or as a careless edit would, and expects
// the checks to name what broke: a check that cannot fail proves nothing.
func TestChecksCatch(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", "plain")
	electord := func(m *manifests) *corev1.Container {
		p, err := findPod(m)
		if err != nil {
			t.Fatal(err)
		}
		return p.electord
	}
	podSpec := func(m *manifests) *corev1.PodSpec { return &m.StatefulSets[0].Spec.Template.Spec }
	// the network policy's ingress rules: 0 the app's pods (peer, gossip;
	// the api in secure), 1 monitoring namespaces (health), 2 everyone (the app)
	setArg := func(m *manifests, name, val string) {
		c := electord(m)
		for i, a := range c.Args {
			if strings.HasPrefix(a, "--"+name+"=") || a == "--"+name {
				c.Args[i] = "--" + name + "=" + val
				return
			}
		}
		c.Args = append(c.Args, "--"+name+"="+val)
	}
	cases := []struct {
		name   string
		break_ func(m *manifests)
		want   string
	}{
		{"readiness on leadership (before issue 13)", func(m *manifests) {
			electord(m).ReadinessProbe.HTTPGet.Path = "/leader/self"
		}, "must not depend on leadership"},
		{"no fsGroup (the volume stays root's)", func(m *manifests) { podSpec(m).SecurityContext.FSGroup = nil }, "fsGroup must be 65532"},
		{"root", func(m *manifests) { podSpec(m).SecurityContext.RunAsNonRoot = nil }, "runAsNonRoot"},
		{"writable root fs", func(m *manifests) { *podSpec(m).Containers[0].SecurityContext.ReadOnlyRootFilesystem = false }, "app: readOnlyRootFilesystem"},
		{"capabilities kept", func(m *manifests) { electord(m).SecurityContext.Capabilities = nil }, "drop ALL"},
		{"no seccomp", func(m *manifests) { podSpec(m).SecurityContext.SeccompProfile = nil }, "seccompProfile"},
		{"no limits", func(m *manifests) { electord(m).Resources.Limits = nil }, "needs a request and a limit"},
		{"no grace period", func(m *manifests) { podSpec(m).TerminationGracePeriodSeconds = nil }, "terminationGracePeriodSeconds"},
		{"a regular container, not a native sidecar", func(m *manifests) {
			s := podSpec(m)
			c := s.InitContainers[0]
			c.RestartPolicy = nil
			s.InitContainers, s.Containers = nil, append(s.Containers, c)
		}, "native sidecar"},
		{"probe on another port", func(m *manifests) { electord(m).LivenessProbe.HTTPGet.Port = intstr.FromInt32(4040) }, "not the health address"},
		{"api on every address", func(m *manifests) { setArg(m, "api-addr", "0.0.0.0:7070") }, "--api-addr must listen on localhost"},
		{"pod IP not from the downward API", func(m *manifests) { setArg(m, "k8s-pod-ip", "10.0.0.1") }, "--k8s-pod-ip must come from the downward API"},
		{"a flag electord does not have", func(m *manifests) { setArg(m, "leader-service", "x") }, "--leader-service, which electord does not have"},
		{"a flag value that does not parse", func(m *manifests) { setArg(m, "quorum", "three") }, "do not parse"},
		{"no quorum mode (a partitioned minority elects its own leader)", func(m *manifests) {
			electord(m).Args = slices.DeleteFunc(electord(m).Args, func(a string) bool { return strings.HasPrefix(a, "--quorum=") })
		}, "--quorum must be 3"},
		{"the Service follows a named election the app does not campaign in", func(m *manifests) { setArg(m, "k8s-leader-election", "my-app") }, "CAMPAIGN_URL must be"},
		{"the app campaigns, the Service follows the node's own election", func(m *manifests) {
			app := &podSpec(m).Containers[0]
			app.Env = append(app.Env, corev1.EnvVar{Name: "CAMPAIGN_URL", Value: "http://127.0.0.1:4040/elections/my-app/campaign"})
		}, "CAMPAIGN_URL is set"},
		{"the app polls another address than the sidecar's", func(m *manifests) { podSpec(m).Containers[0].Env[0].Value = "http://127.0.0.1:7074/leader/self" }, "LEADER_URL must be"},
		{"no PDB", func(m *manifests) { m.PDBs = nil }, "PodDisruptionBudget"},
		{"no NetworkPolicy", func(m *manifests) { m.NetworkPolicies = nil }, "no NetworkPolicy"},
		{"gossip open to all", func(m *manifests) {
			m.NetworkPolicies[0].Spec.Ingress = append(m.NetworkPolicies[0].Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		}, "admits TCP 7946 from anywhere"},
		{"peer port open to a namespace", func(m *manifests) {
			r := &m.NetworkPolicies[0].Spec.Ingress[0]
			r.From[0].NamespaceSelector = r.From[0].PodSelector
		}, "admits TCP 7071 from more than the app's pods"},
		{"RBAC: list and watch too", func(m *manifests) {
			m.Roles[0].Rules[0].Verbs = append(m.Roles[0].Rules[0].Verbs, "list", "watch")
		}, "list discovery.k8s.io/endpointslices is more than"},
		{"RBAC: delete services", func(m *manifests) {
			for i := range m.Roles[0].Rules {
				if slices.Contains(m.Roles[0].Rules[i].Resources, "services") {
					m.Roles[0].Rules[i].Verbs = append(m.Roles[0].Rules[i].Verbs, "delete")
				}
			}
		}, "delete /services is more than"},
		{"RBAC: the default account", func(m *manifests) { podSpec(m).ServiceAccountName = "" }, "serviceAccountName"},
		{"leader Service with a selector", func(m *manifests) {
			for _, s := range m.Services {
				if s.Name == "my-app-leader" {
					s.Spec.Selector = map[string]string{"app.kubernetes.io/name": "my-app"}
				}
			}
		}, "has a selector"},
		{"no --insecure in plain", func(m *manifests) {
			electord(m).Args = slices.DeleteFunc(electord(m).Args, func(a string) bool { return a == "--insecure" })
		}, "without --insecure"},

		// Review of issues 13-14, finding 7: IPv6.
		{"peer address without brackets (before the review)", func(m *manifests) { setArg(m, "peer-addr", "$(POD_IP):7071") }, "with pod IP fd00::a the manifest's arguments are refused: peer-addr"},
		{"gossip address without brackets", func(m *manifests) { setArg(m, "gossip-addr", "$(POD_IP):7946") }, "--gossip-addr must listen on the pod IP, written [$(POD_IP)]:port"},
		// Finding 5: the token in electord only.
		{"token automounted (before the review)", func(m *manifests) { podSpec(m).AutomountServiceAccountToken = nil }, "automountServiceAccountToken must be false"},
		{"token mounted into the app", func(m *manifests) {
			app := &podSpec(m).Containers[0]
			app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: "electord-token", MountPath: "/var/run/secrets/tokens", ReadOnly: true})
		}, "app: mounts the service-account token"},
		{"no token for electord", func(m *manifests) {
			c := electord(m)
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "electord-token" })
		}, "electord: no service-account token"},
		{"token volume without the cluster CA", func(m *manifests) {
			for i := range podSpec(m).Volumes {
				if v := &podSpec(m).Volumes[i]; v.Projected != nil {
					v.Projected.Sources = slices.DeleteFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ConfigMap != nil })
				}
			}
		}, "ca.crt false"},
		// Finding 9: the health port.
		{"health port open to all (before the review)", func(m *manifests) {
			r := &m.NetworkPolicies[0].Spec.Ingress[1]
			r.From = nil
		}, "admits TCP 7074 from anywhere"},
		{"health port open to every namespace", func(m *manifests) {
			r := &m.NetworkPolicies[0].Spec.Ingress[1]
			r.From[0].NamespaceSelector = &metav1.LabelSelector{}
		}, "admits the health port 7074 from every pod"},
		{"health port in the app's open rule", func(m *manifests) {
			r := &m.NetworkPolicies[0].Spec.Ingress[2]
			r.Ports = append(r.Ports, r.Ports[0])
			r.Ports[len(r.Ports)-1].Port = ptr(intstr.FromInt32(7074))
		}, "admits TCP 7074 from anywhere"},
		{"no rule for monitoring", func(m *manifests) {
			in := &m.NetworkPolicies[0].Spec.Ingress
			*in = slices.Delete(*in, 1, 2)
		}, "from a monitoring namespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { breaks(t, dir, false, c.break_, c.want) })
	}

	// The named overlay: the app campaigns in the election the Service
	// follows, and quorum mode is off (electord refuses it there).
	named := filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", "named")
	for _, c := range []struct {
		name   string
		break_ func(m *manifests)
		want   string
	}{
		{"the Service follows another election than the app's", func(m *manifests) { setArg(m, "k8s-leader-election", "other") }, "CAMPAIGN_URL must be"},
		{"no quorum mode with a named election", func(m *manifests) {
			electord(m).Args = slices.DeleteFunc(electord(m).Args, func(a string) bool { return strings.HasPrefix(a, "--quorum=") })
		}, "--quorum must be 3"},
	} {
		t.Run("named/"+c.name, func(t *testing.T) { breaks(t, named, false, c.break_, c.want) })
	}

	// The secure overlay: its api is reachable by the app's pods only.
	secure := filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", "secure")
	for _, c := range []struct {
		name   string
		break_ func(m *manifests)
		want   string
	}{
		{"api on localhost (before the review: forwarding and the status page reach nothing)", func(m *manifests) { setArg(m, "api-addr", "127.0.0.1:7070") }, "secure overlay: --api-addr \"127.0.0.1:7070\" is on localhost"},
		{"api on the pod IP only (kubectl port-forward dials localhost)", func(m *manifests) { setArg(m, "api-addr", "[$(POD_IP)]:7070") }, "--api-addr must listen on localhost"},
		{"api port not admitted from the app's pods", func(m *manifests) {
			r := &m.NetworkPolicies[0].Spec.Ingress[0]
			r.Ports = slices.DeleteFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntValue() == 7070 })
		}, "no NetworkPolicy rule admits it from the app's pods"},
		{"api port open to all", func(m *manifests) {
			r := &m.NetworkPolicies[0].Spec.Ingress[2]
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(7070))})
		}, "admits TCP 7070 from anywhere"},
	} {
		t.Run("secure/"+c.name, func(t *testing.T) { breaks(t, secure, true, c.break_, c.want) })
	}
}

// breaks builds the overlay in dir, breaks it, and expects an error that
// mentions want.
func breaks(t *testing.T, dir string, secure bool, break_ func(*manifests), want string) {
	t.Helper()
	m := build(t, dir)
	break_(m)
	errs := append(check(m), checkSecurity(m, secure)...)
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Errorf("no error mentions %q; got %v", want, errs)
}

func ptr[T any](v T) *T { return &v }

// TestDockerfile: the image is the static binary alone, as uid 65532.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "k8s", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from, user []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.EqualFold(f[0], "FROM") {
			from = append(from, f[1])
		}
		if len(f) >= 2 && strings.EqualFold(f[0], "USER") {
			user = append(user, f[1])
		}
	}
	if !slices.Equal(from, []string{"scratch"}) {
		t.Errorf("Dockerfile: FROM %v, want scratch alone (no image can be pulled)", from)
	}
	if len(user) == 0 || user[len(user)-1] != "65532:65532" {
		t.Errorf("Dockerfile: USER %v, want 65532:65532 (the pod's runAsUser and fsGroup)", user)
	}
}
