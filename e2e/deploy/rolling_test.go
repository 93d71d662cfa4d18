package deploy

// A StatefulSet's rolling update, with pods simulated by Docker from the
// scratch image of deploy/k8s/Dockerfile, and the time without a leader
// measured over each whole update (issue 13: goal <= 100 ms in total).
//
// Each pod is what the kubelet would make of the overlay's pod template
// (plain; TestSecureRollingUpdateInDocker runs the secure one,
// TestNamedRollingUpdateInDocker the named one): a pause container
// (tools/cmd/pause) that holds the pod's
// network namespace, hostname my-app-<ordinal> and address on a
// user-defined network, where it carries the headless Service's name as a
// network alias (electord-peers.default.svc, what --join resolves); the
// electord sidecar with the manifest's arguments (downward-API values
// filled in; the --k8s-* ones left out, as there is no API server here),
// as uid/gid 65532 with a read-only root file system, all capabilities
// dropped, no new privileges, Docker's default seccomp profile, the
// manifest's limits, and the pod's named volume owned as fsGroup leaves
// it (group 65532, setgid); and the app (exampleapp) beside it, which
// follows the election the leader Service follows, as the manifest sets
// it: it polls whether its node leads the node's own election (plain,
// secure), or campaigns in the named election (named:
// --k8s-leader-election) through the sidecar. The sidecar starts first
// and the app once its startup probe passes, as for a native sidecar.
//
// The update is the StatefulSet controller's: highest ordinal first, delete
// the pod (SIGTERM to the app, then to the sidecar, with the grace period,
// as the kubelet stops a pod with a native sidecar), wait until it is gone,
// create the new one with the same volume, wait for its readiness probe
// (GET /readyz 200 on the health port), go on. Leaderless time is what the
// nodes say of the election the leader Service follows: the test follows
// every electord's WatchLeader stream of that election over its
// localhost API port, entered through the pod's network namespace, and a
// sampler adds up the time during which no running node claims to lead (a
// node whose stream broke claims nothing), from the first SIGTERM until
// every pod is Ready and one leader is claimed and seen by its app.
//
// The app's view is measured too, since a native sidecar stops after the
// app: the time during which no running app says it leads (exampleapp's
// "leads=" lines: a leader that drains does not lead), over the same
// window. The apps drain for E2E_DEPLOY_APP_DRAIN (default 1s) after
// SIGTERM; a leading app first hands over (exampleapp: it asks its
// electord to resign, or closes its campaign and its node transfers the
// leadership), unless E2E_DEPLOY_APP_RESIGN=off, which shows the window
// without it: the whole drain of the leader's app. In the secure overlay
// the app polls and does not hand over: Resign would need an admin client
// certificate in the app, which is not simulated.
//
//	sudo go test -run RollingUpdateInDocker -v ./   (in e2e/deploy; all three overlays)
//	E2E_DEPLOY_ROLLS=10 for more updates (default 5 for plain, 2 for named)
//	E2E_DEPLOY_LOGS=dir keeps each deleted pod's electord log there

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"

	pb "github.com/electord/electord/proto/electord/v1"
)

const (
	namespace = "default"
	replicas  = 3
	// maxLeaderless bounds one whole update's leaderless time. It is not
	// the goal (100 ms, reported, not asserted): it fails the test when a
	// handover stalls, as one without SIGTERM handover or with leadership
	// readiness would.
	maxLeaderless = 2 * time.Second
)

// simPod is one incarnation of a pod.
type simPod struct {
	ord     int
	id      uint64
	name    string // my-app-<ord>
	prefix  string // container names: <prefix>-pause, -electord, -app
	ip      string
	netns   string // /proc/<pause pid>/ns/net
	rev     int
	stopped chan struct{} // closed when the watch should end

	mu      sync.Mutex
	running bool // electord's container runs
	view    *pb.LeaderInfo
	appLog  string // the app's log, kept when the pod is deleted
}

type sim struct {
	t        *testing.T
	ctx      context.Context
	label    string
	network  string
	image    string
	appImage string
	// pauseImage holds tools/cmd/pause, the pod's pause process.
	pauseImage string
	tmpl       *pod // the plain overlay's pod template
	args       []string
	// election is the election the leader Service follows and the apps
	// follow: the named one they campaign in (--k8s-leader-election), or
	// "" for the nodes' own.
	election string
	health   string // the health port
	ready    string // readiness path
	live     string // liveness (startup) path
	volumes  []string
	mounts   []string // -v flags: the Secret volumes
	creds    credentials.TransportCredentials
	grace    int64
	appEnv   []string // -e flags for the app beyond the manifest's
	// adminCreds: an admin client's (the secure overlay) for commands
	adminCreds credentials.TransportCredentials

	mu   sync.Mutex
	pods []*simPod
}

func TestRollingUpdateInDocker(t *testing.T) {
	needDockerRoot(t)
	rollingUpdate(t, "plain", rolls(t, 5))
}

// TestNamedRollingUpdateInDocker runs the named overlay's pods: the apps
// campaign in the named election, the nodes run in quorum mode (voters), and
// each leading app hands over by closing its campaign. Fewer updates than
// plain by default: the pods, the update and the measure are the same.
func TestNamedRollingUpdateInDocker(t *testing.T) {
	needDockerRoot(t)
	rollingUpdate(t, "named", rolls(t, 2))
}

// rolls is E2E_DEPLOY_ROLLS, or def.
func rolls(t *testing.T, def int) int {
	v := os.Getenv("E2E_DEPLOY_ROLLS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("E2E_DEPLOY_ROLLS=%q: want a positive number", v)
	}
	return n
}

// TestSecureRollingUpdateInDocker runs the secure overlay's pods, with the
// TLS files and the gossip key laid out as its Secret volumes would be
// (each Secret's keys at the overlay's paths, group fsGroup, its mode), and
// one rolling update: the overlay's paths and $(POD_NAME) choice of
// certificate are what electord needs to start and elect over mutual TLS.
func TestSecureRollingUpdateInDocker(t *testing.T) {
	needDockerRoot(t)
	rollingUpdate(t, "secure", 1)
}

func needDockerRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no Docker pods")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the volume is chowned as fsGroup would, and the pods' namespaces are entered to follow electord")
	}
}

// rollingUpdate starts the overlay's pods and updates them rolls times.
func rollingUpdate(t *testing.T, overlay string, rolls int) {
	budget := 4*time.Minute + time.Duration(rolls)*time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl)-30*time.Second < budget {
		budget = time.Until(dl) - 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	sweepStale(t)
	s := &sim{t: t, ctx: ctx, label: ownResources(t)}
	s.render(overlay)
	root := repoRoot(t)
	s.image = "electord-e2e-deploy:" + s.label
	s.appImage = "electord-e2e-deploy-app:" + s.label
	buildImage(ctx, t, root, "./cmd/electord", filepath.Join(root, "deploy", "k8s", "Dockerfile"), "electord", s.image, s.label)
	appDocker := filepath.Join(t.TempDir(), "Dockerfile")
	os.WriteFile(appDocker, []byte("FROM scratch\nCOPY exampleapp /exampleapp\nUSER 65532:65532\nENTRYPOINT [\"/exampleapp\"]\n"), 0o644)
	buildImage(ctx, t, ".", "./exampleapp", appDocker, "exampleapp", s.appImage, s.label)
	s.pauseImage = "electord-e2e-deploy-pause:" + s.label
	pauseDocker := filepath.Join(t.TempDir(), "Dockerfile")
	os.WriteFile(pauseDocker, []byte("FROM scratch\nCOPY pause /pause\nUSER 65532:65532\nENTRYPOINT [\"/pause\"]\n"), 0o644)
	buildImage(ctx, t, filepath.Join(root, "tools"), "./cmd/pause", pauseDocker, "pause", s.pauseImage, s.label)

	s.network = "electord-e2e-deploy-" + s.label
	if _, err := docker(ctx, "network", "create", "--label", labelKey+"="+s.label, s.network); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		s.volumes = append(s.volumes, s.volume(i))
	}
	s.secrets()
	drain, resign := envOr("E2E_DEPLOY_APP_DRAIN", "1s"), envOr("E2E_DEPLOY_APP_RESIGN", "on")
	if d, err := time.ParseDuration(drain); err != nil || d < 0 || d > 10*time.Second {
		t.Fatalf("E2E_DEPLOY_APP_DRAIN=%q: want a Go duration up to 10s", drain)
	}
	if resign != "on" && resign != "off" {
		t.Fatalf("E2E_DEPLOY_APP_RESIGN=%q: want on or off", resign)
	}
	if s.election == "" && flagValue(s.args, "tls-ca") != "" {
		resign = "off" // Resign would need an admin client certificate in the app (not simulated)
	}
	s.appEnv = []string{"-e", "DRAIN=" + drain}
	if resign == "off" {
		s.appEnv = append(s.appEnv, "-e", "HANDOVER=off")
	}
	t.Logf("apps drain for %s after SIGTERM; hand over first: %s", drain, resign)
	if overlay == "plain" {
		s.rootOwnedVolumeRefused()
	}

	// The first start: all pods at once (podManagementPolicy: Parallel).
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.startPod(i, 0) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.waitSettled(time.Minute); err != nil {
		t.Fatalf("first start: %v", err)
	}
	s.resignThroughFollower(overlay == "secure")
	sm := s.sample()
	defer sm.stop()

	var totals, appTotals []time.Duration
	for r := 1; r <= rolls; r++ {
		sm.read()
		sm.total()
		start := time.Now()
		var steps []string
		var incarnations []*simPod
		for ord := range replicas {
			incarnations = append(incarnations, s.pod(ord))
		}
		for ord := replicas - 1; ord >= 0; ord-- {
			old := s.pod(ord)
			role := "follower"
			if v := old.claim(); v {
				role = "leader"
			}
			t0 := time.Now()
			if err := s.deletePod(old); err != nil {
				t.Fatalf("update %d: deleting %s: %v", r, old.name, err)
			}
			down, _ := sm.read()
			if err := s.startPod(ord, r); err != nil {
				t.Fatalf("update %d: creating %s: %v", r, old.name, err)
			}
			incarnations = append(incarnations, s.pod(ord))
			if err := s.waitReady(s.pod(ord), time.Minute); err != nil {
				t.Fatalf("update %d: %s not Ready: %v", r, old.name, err)
			}
			up, _ := sm.read()
			steps = append(steps, fmt.Sprintf("%s(%s) %v: leaderless %s while stopping + %s while starting",
				old.name, role, time.Since(t0).Round(time.Millisecond), msf(down), msf(up)))
			sm.add(down + up)
		}
		if err := s.waitSettled(time.Minute); err != nil {
			t.Fatalf("update %d: %v", r, err)
		}
		tail, _ := sm.read()
		sm.add(tail)
		none, double := sm.total()
		end := time.Now()
		totals = append(totals, none)
		appNone, err := s.appLeaderless(incarnations, start, end)
		if err != nil {
			t.Fatalf("update %d: the apps' view: %v", r, err)
		}
		appTotals = append(appTotals, appNone)
		t.Logf("update %d: %s in all, leaderless %s ms in total (no app leads: %s ms), %d double-claim samples; %s",
			r, end.Sub(start).Round(time.Millisecond), msf(none), msf(appNone), double, strings.Join(steps, "; "))
		if none > maxLeaderless {
			t.Errorf("update %d: %s ms without a leader, more than %s", r, msf(none), maxLeaderless)
		}
	}
	sorted, med := medianOf(totals)
	verdict := "met"
	if med > 100*time.Millisecond {
		verdict = "NOT met"
	}
	t.Logf("%s overlay, rolling update of %d pods, %d updates: leaderless in total per update, median %s ms, min %s, max %s (goal <= 100 ms: %s); each: %s",
		overlay, replicas, rolls, msf(med), msf(sorted[0]), msf(sorted[len(sorted)-1]), verdict, joinMs(totals))
	sorted, med = medianOf(appTotals)
	t.Logf("%s overlay, the apps' view (drain %s, hand over first: %s): no app leads, per update, median %s ms, min %s, max %s; each: %s",
		overlay, drain, resign, msf(med), msf(sorted[0]), msf(sorted[len(sorted)-1]), joinMs(appTotals))
}

func medianOf(ds []time.Duration) ([]time.Duration, time.Duration) {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	return sorted, med
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// appLeaderless is the time in [start, end] during which no app of the
// given incarnations said it leads, from their "leads=" log lines (a
// deleted pod's log was kept when it was deleted; a running one's is read
// now, and its last state lasts until end).
func (s *sim) appLeaderless(pods []*simPod, start, end time.Time) (time.Duration, error) {
	type span struct{ from, to time.Time }
	var spans []span
	for _, p := range pods {
		p.mu.Lock()
		logs, running := p.appLog, p.running
		p.mu.Unlock()
		if running {
			var err error
			if logs, err = docker(s.ctx, "logs", p.prefix+"-app"); err != nil {
				return 0, err
			}
		}
		var open *time.Time
		for _, line := range strings.Split(logs, "\n") {
			_, rest, ok := strings.Cut(line, " leads=")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) < 2 || !strings.HasPrefix(f[1], "at=") {
				return 0, fmt.Errorf("%s: app log line %q", p.name, line)
			}
			at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[1], "at="))
			if err != nil {
				return 0, fmt.Errorf("%s: app log line %q: %v", p.name, line, err)
			}
			switch {
			case f[0] == "true" && open == nil:
				open = &at
			case f[0] == "false" && open != nil:
				spans = append(spans, span{*open, at})
				open = nil
			}
		}
		if open != nil {
			if !running {
				return 0, fmt.Errorf("%s: the app exited without a leads=false line", p.name)
			}
			spans = append(spans, span{*open, end})
		}
	}
	// The window minus the union of the spans.
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	covered, reach := time.Duration(0), start
	for _, sp := range spans {
		from, to := sp.from, sp.to
		if from.Before(reach) {
			from = reach
		}
		if to.After(end) {
			to = end
		}
		if to.After(from) {
			covered += to.Sub(from)
			reach = to
		}
	}
	return end.Sub(start) - covered, nil
}

// resignThroughFollower sends Resign (of the node's own, default election)
// to a follower's api, as electctl resign through kubectl port-forward to
// that pod would: the follower forwards it to the leader's advertised api.
// In the secure overlay the api listens on every address and is advertised
// as the pod IP, so this must work (review finding 3); in the plain one
// every member advertises 127.0.0.1:7070, the follower's own, and the
// README says to send commands to the leader's pod: the outcome is logged.
// It is the apps' election in the plain and secure overlays; in the named
// one the election the apps campaign in is not touched by it.
func (s *sim) resignThroughFollower(mustWork bool) {
	// In the named overlay the apps' election settles first (named
	// elections do not wait for bootstrap-expect): wait for the nodes' own
	// to have a leader too.
	var leader, follower *simPod
	for deadline := time.Now().Add(time.Minute); leader == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for ord := range replicas {
			if p := s.pod(ord); s.leadsDefault(p) {
				leader = p
			} else {
				follower = p
			}
		}
	}
	if leader == nil || follower == nil {
		s.t.Fatalf("resign through a follower: leader %v, follower %v", leader, follower)
	}
	conn := s.api(follower, s.adminCreds)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	_, err := pb.NewElectorClient(conn).Resign(ctx, &pb.ResignRequest{})
	if !mustWork {
		s.t.Logf("resign sent to follower %s (leader %s) with the api on localhost: %v (expected to fail: it forwards to its own 127.0.0.1)", follower.name, leader.name, err)
		if err := s.waitSettled(time.Minute); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	if err != nil {
		s.t.Fatalf("resign sent to follower %s, to be forwarded to leader %s: %v", follower.name, leader.name, err)
	}
	if err := s.waitSettled(time.Minute); err != nil {
		s.t.Fatal(err)
	}
	if s.leadsDefault(leader) {
		s.t.Fatalf("resign forwarded by %s: %s still leads", follower.name, leader.name)
	}
	s.t.Logf("resign sent to follower %s was forwarded to leader %s at its pod IP; it no longer leads", follower.name, leader.name)
}

// api is a connection to p's api port on localhost, entered through p's
// network namespace.
func (s *sim) api(p *simPod, creds credentials.TransportCredentials) *grpc.ClientConn {
	_, port, _ := net.SplitHostPort(flagValue(s.args, "api-addr"))
	conn, err := grpc.NewClient("passthrough:///"+net.JoinHostPort("127.0.0.1", port),
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialInNetns(ctx, p.netns, addr)
		}))
	if err != nil {
		s.t.Fatal(err)
	}
	return conn
}

// leadsDefault asks p's electord whether it leads its own (default)
// election.
func (s *sim) leadsDefault(p *simPod) bool {
	conn := s.api(p, s.creds)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	r, err := pb.NewElectorClient(conn).GetLeader(ctx, &pb.GetLeaderRequest{}, grpc.WaitForReady(true))
	return err == nil && r.GetSelf()
}

func msf(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

func joinMs(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, msf(d))
	}
	return strings.Join(s, ", ")
}

// render takes the pod from the overlay, as the cluster would get it.
func (s *sim) render(overlay string) {
	p, err := findPod(build(s.t, filepath.Join(repoRoot(s.t), "deploy", "k8s", "overlays", overlay)))
	if err != nil {
		s.t.Fatal(err)
	}
	s.tmpl = p
	s.election = flagValue(p.electord.Args, "k8s-leader-election")
	for _, a := range p.electord.Args {
		if !strings.HasPrefix(a, "--k8s-") { // no API server to write the leader's EndpointSlice to
			s.args = append(s.args, a)
		}
	}
	rp, lp := p.electord.ReadinessProbe, p.electord.StartupProbe
	if rp == nil || rp.HTTPGet == nil || lp == nil || lp.HTTPGet == nil {
		s.t.Fatal("the electord sidecar needs HTTP readiness and startup probes")
	}
	s.ready, s.live = rp.HTTPGet.Path, lp.HTTPGet.Path
	s.health = strconv.Itoa(int(port(p.electord, rp.HTTPGet.Port)))
	s.grace = 30
	if g := p.spec.TerminationGracePeriodSeconds; g != nil {
		s.grace = *g
	}
}

// rootOwnedVolumeRefused: without fsGroup the volume stays root's, and
// electord, as 65532, must refuse to start (exit 2, naming data-dir)
// rather than elect leaders with a term it cannot persist (issue 13).
func (s *sim) rootOwnedVolumeRefused() {
	name := "electord-e2e-deploy-" + s.label + "-rootvol"
	if _, err := docker(s.ctx, "volume", "create", "--label", labelKey+"="+s.label, name); err != nil {
		s.t.Fatal(err)
	}
	args := append([]string{"run", "--name", name, "--hostname", "my-app-0", "--network", s.network, "-v", name + ":/data"}, s.hardened(s.tmpl.electord)...)
	args = append(append(args, s.image), expand(s.args, map[string]string{"POD_NAME": "my-app-0", "POD_IP": "0.0.0.0", "POD_NAMESPACE": namespace})...)
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second) // a node that starts would run on
	out, err := docker(ctx, args...)
	cancel()
	code, _ := docker(s.ctx, "inspect", "-f", "{{.State.ExitCode}}", name)
	if err == nil || code != "2" || !strings.Contains(out, "data-dir") {
		s.t.Errorf("electord on a root-owned volume: exit %s, %v; want exit 2 naming data-dir; output:\n%s", code, err, out)
	}
	docker(s.ctx, "rm", "-f", name)
}

// volume creates ordinal i's volume, owned as the kubelet leaves a volume
// for fsGroup 65532: group 65532, group-writable, setgid.
func (s *sim) volume(i int) string {
	name := fmt.Sprintf("electord-e2e-deploy-%s-data-my-app-%d", s.label, i)
	if _, err := docker(s.ctx, "volume", "create", "--label", labelKey+"="+s.label, name); err != nil {
		s.t.Fatal(err)
	}
	mp, err := docker(s.ctx, "volume", "inspect", "-f", "{{.Mountpoint}}", name)
	if err != nil {
		s.t.Fatal(err)
	}
	gid := int(*s.tmpl.spec.SecurityContext.FSGroup)
	if err := os.Chown(mp, 0, gid); err != nil {
		s.t.Fatalf("volume %s: chown as fsGroup %d: %v (the Docker daemon must be local)", name, gid, err)
	}
	if err := os.Chmod(mp, 0o770|os.ModeSetgid); err != nil {
		s.t.Fatal(err)
	}
	return name
}

func (s *sim) pod(ord int) *simPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[ord]
}

// limits are a container's limits as docker run flags.
func limits(c *corev1.Container) []string {
	var out []string
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		out = append(out, "--cpus", strconv.FormatFloat(q.AsApproximateFloat64(), 'f', 3, 64))
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		out = append(out, "--memory", strconv.FormatInt(q.Value(), 10))
	}
	return out
}

// hardened are the docker run flags for a container as the pod's
// securityContext runs it (Docker's default seccomp profile is
// RuntimeDefault's).
func (s *sim) hardened(c *corev1.Container) []string {
	sc := s.tmpl.spec.SecurityContext
	return append([]string{
		"--user", fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup), "--group-add", strconv.FormatInt(*sc.FSGroup, 10),
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--label", labelKey + "=" + s.label,
	}, limits(c)...)
}

// startPod creates ordinal ord's pod at revision rev and waits for its
// sidecar's startup probe, then starts its app.
func (s *sim) startPod(ord, rev int) error {
	name := fmt.Sprintf("my-app-%d", ord)
	p := &simPod{ord: ord, id: uint64(ord + 1), name: name, rev: rev, stopped: make(chan struct{}),
		prefix: fmt.Sprintf("electord-e2e-deploy-%s-%s-r%d", s.label, name, rev)}
	s.mu.Lock()
	for len(s.pods) <= ord {
		s.pods = append(s.pods, nil)
	}
	s.pods[ord] = p
	s.mu.Unlock()
	svc := s.tmpl.sts.Spec.ServiceName
	if _, err := docker(s.ctx, "run", "-d", "--name", p.prefix+"-pause", "--hostname", name,
		"--network", s.network, "--network-alias", svc+"."+namespace+".svc", "--network-alias", svc,
		"--user", "65532:65532", "--read-only", "--cap-drop", "ALL", "--label", labelKey+"="+s.label,
		s.pauseImage); err != nil {
		return err
	}
	out, err := docker(s.ctx, "inspect", "-f", "{{.State.Pid}} {{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", p.prefix+"-pause")
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return fmt.Errorf("pause container: pid and address %q", out)
	}
	p.netns, p.ip = "/proc/"+f[0]+"/ns/net", f[1]
	env := map[string]string{"POD_NAME": name, "POD_IP": p.ip, "POD_NAMESPACE": namespace}
	args := []string{"run", "-d", "--name", p.prefix + "-electord", "--network", "container:" + p.prefix + "-pause",
		"-v", s.volumes[ord] + ":/data", "-e", fmt.Sprintf("REVISION=%d", rev)}
	args = append(args, s.mounts...)
	args = append(args, s.hardened(s.tmpl.electord)...)
	args = append(append(args, s.image), expand(s.args, env)...)
	if _, err := docker(s.ctx, args...); err != nil {
		return err
	}
	p.mu.Lock()
	p.running = true
	p.mu.Unlock()
	go s.watch(p)
	if err := s.poll(p, s.live, time.Minute); err != nil {
		return fmt.Errorf("%s: startup probe: %w", name, err)
	}
	// The watch must see the node from here on: a pod the test cannot
	// see would count as not leading, and inflate the leaderless time.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		seen := p.view != nil
		p.mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no WatchLeader answer within 10s of its startup probe", name)
		}
	}
	app := s.tmpl.spec.Containers[0]
	args = []string{"run", "-d", "--name", p.prefix + "-app", "--network", "container:" + p.prefix + "-pause", "-e", "POLL=20ms", "-e", "RETRY=20ms"}
	args = append(args, s.appEnv...)
	for _, e := range app.Env {
		args = append(args, "-e", e.Name+"="+e.Value)
	}
	args = append(args, s.hardened(&app)...)
	_, err = docker(s.ctx, append(args, s.appImage)...)
	return err
}

// deletePod stops a pod as the kubelet stops one with a native sidecar:
// SIGTERM to the app, then, once it is out, to the sidecar, each with the
// grace period; then the pod's containers and namespace go.
func (s *sim) deletePod(p *simPod) error {
	grace := strconv.FormatInt(s.grace, 10)
	if _, err := docker(s.ctx, "stop", "-t", grace, p.prefix+"-app"); err != nil {
		return err
	}
	if _, err := docker(s.ctx, "stop", "-t", grace, p.prefix+"-electord"); err != nil {
		return err
	}
	code, err := docker(s.ctx, "inspect", "-f", "{{.State.ExitCode}}", p.prefix+"-electord")
	if err != nil {
		return err
	}
	appLog, _ := docker(s.ctx, "logs", p.prefix+"-app")
	p.mu.Lock()
	p.running, p.view, p.appLog = false, nil, appLog
	p.mu.Unlock()
	close(p.stopped)
	if dir := os.Getenv("E2E_DEPLOY_LOGS"); dir != "" {
		logs, _ := docker(s.ctx, "logs", "-t", p.prefix+"-electord")
		os.WriteFile(filepath.Join(dir, p.prefix+".log"), []byte(logs), 0o644)
	}
	if code != "0" {
		logs, _ := docker(s.ctx, "logs", "--tail", "20", p.prefix+"-electord")
		return fmt.Errorf("electord exited %s after SIGTERM (want 0); its last lines:\n%s", code, logs)
	}
	_, err = docker(s.ctx, "rm", "-f", p.prefix+"-app", p.prefix+"-electord", p.prefix+"-pause")
	return err
}

// watch follows the pod's electord over WatchLeader of the election the
// Service follows on its localhost API port until the pod is deleted. A broken stream is
// no claim.
func (s *sim) watch(p *simPod) {
	api := flagValue(s.args, "api-addr")
	if h, port, err := net.SplitHostPort(api); err == nil && wildcard(h) {
		api = net.JoinHostPort("127.0.0.1", port) // as kubectl port-forward dials it
	}
	conn, err := grpc.NewClient("passthrough:///"+api,
		grpc.WithTransportCredentials(s.creds),
		// Reconnect at once: grpc-go's default backoff (1 s and up) would
		// leave the test blind to a node that has just started.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.2, MaxDelay: 20 * time.Millisecond}, MinConnectTimeout: time.Second}),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialInNetns(ctx, p.netns, addr) }))
	if err != nil {
		s.t.Errorf("%s: %v", p.name, err)
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	go func() { <-p.stopped; cancel() }()
	client := pb.NewElectorClient(conn)
	for ctx.Err() == nil {
		if stream, err := client.WatchLeader(ctx, &pb.WatchLeaderRequest{Election: s.election}, grpc.WaitForReady(true)); err == nil {
			for {
				ev, err := stream.Recv()
				p.mu.Lock()
				if err != nil {
					p.view = nil
				} else {
					p.view = ev.Leader
				}
				p.mu.Unlock()
				if err != nil {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// claim: the pod's electord runs and says it leads the election the
// Service follows (of a named one: it stands for the leading app).
func (p *simPod) claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running && p.view != nil && p.view.Self && p.view.Id == p.id
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

var httpc = &http.Client{Timeout: time.Second}

// get is one GET of a pod's port; status 0 when it does not answer.
func get(url string) (int, []byte) {
	resp, err := httpc.Get(url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var b [4096]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode, b[:n]
}

// poll waits until path on the pod's health port answers 200.
func (s *sim) poll(p *simPod, path string, within time.Duration) error {
	url := "http://" + net.JoinHostPort(p.ip, s.health) + path
	deadline := time.Now().Add(within)
	last := 0
	for time.Now().Before(deadline) && s.ctx.Err() == nil {
		if last, _ = get(url); last == http.StatusOK {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // the kubelet's probe period, shortened
	}
	logs, _ := docker(context.Background(), "logs", "--tail", "20", p.prefix+"-electord")
	return fmt.Errorf("GET %s: %d, not 200 within %s; electord's last lines:\n%s", url, last, within, logs)
}

func (s *sim) waitReady(p *simPod, within time.Duration) error { return s.poll(p, s.ready, within) }

// waitSettled waits until every pod is Ready, exactly one claims to lead,
// and every app reports its pod's role as the sidecar gives it.
func (s *sim) waitSettled(within time.Duration) error {
	deadline := time.Now().Add(within)
	var why string
	for time.Now().Before(deadline) && s.ctx.Err() == nil {
		why = s.settled()
		if why == "" {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not settled within %s: %s", within, why)
}

func (s *sim) settled() string {
	var leaders []string
	for ord := range replicas {
		p := s.pod(ord)
		if code, _ := get("http://" + net.JoinHostPort(p.ip, s.health) + s.ready); code != http.StatusOK {
			return fmt.Sprintf("%s: readiness %d", p.name, code)
		}
		lead := p.claim()
		if lead {
			leaders = append(leaders, p.name)
		}
		_, body := get("http://" + net.JoinHostPort(p.ip, "8080") + "/")
		var app struct{ Pod, Role string }
		json.Unmarshal(body, &app)
		if want := map[bool]string{true: "leader", false: "follower"}[lead]; app.Role != want || app.Pod != p.name {
			return fmt.Sprintf("%s: the app says %q is %q, the sidecar's watch says %s", p.name, app.Pod, app.Role, want)
		}
	}
	if len(leaders) != 1 {
		return fmt.Sprintf("pods claiming to lead: %v", leaders)
	}
	return ""
}

// sampler adds up the time during which no pod claims to lead, and counts
// the samples at which two do.
type sampler struct {
	mu          sync.Mutex
	none        time.Duration
	double      int
	sumNone     time.Duration
	sumDouble   int
	stopc, done chan struct{}
}

func (s *sim) sample() *sampler {
	sm := &sampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		last := time.Now()
		for {
			select {
			case <-sm.stopc:
				return
			case <-time.After(250 * time.Microsecond):
			}
			n := 0
			for ord := range replicas {
				if s.pod(ord).claim() {
					n++
				}
			}
			now := time.Now()
			sm.mu.Lock()
			if n == 0 {
				sm.none += now.Sub(last)
			} else if n > 1 {
				sm.double++
			}
			sm.mu.Unlock()
			last = now
		}
	}()
	return sm
}

// read returns the leaderless time since the last read.
func (sm *sampler) read() (time.Duration, int) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	n, d := sm.none, sm.double
	sm.none, sm.double = 0, 0
	sm.sumDouble += d
	return n, d
}

// add counts d into the current update's total.
func (sm *sampler) add(d time.Duration) {
	sm.mu.Lock()
	sm.sumNone += d
	sm.mu.Unlock()
}

// total returns and resets the current update's totals.
func (sm *sampler) total() (time.Duration, int) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	n, d := sm.sumNone, sm.sumDouble
	sm.sumNone, sm.sumDouble = 0, 0
	return n, d
}

func (sm *sampler) stop() { close(sm.stopc); <-sm.done }
