package k8s

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/electord/electord/tools/faultnet"
)

// The API server this test runs: kube-apiserver built from k8s.io/kubernetes
// (its staging modules replaced by their releases), with Debian's etcd.
const (
	kubeVersion    = "v1.34.4"
	stagingVersion = "v0.34.4"
)

// Inside the cluster's hub namespace (faultnet): the nodes reach the API
// server at hubIP, which no partition cuts; etcd listens on the hub's
// loopback only.
const (
	hubIP          = "10.77.0.254"
	apiPort        = 20443
	etcdClientPort = 20379
	etcdPeerPort   = 20380
	adminToken     = "e2e-admin-token"
)

// kubeAPIServer returns the kube-apiserver binary, built once into the
// user's cache directory and reused after.
func kubeAPIServer(t *testing.T) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the kube-apiserver build: %v", err)
	}
	dir := filepath.Join(cache, "electord-e2e-k8s", "kube-apiserver-"+kubeVersion)
	bin := filepath.Join(dir, "kube-apiserver")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		t.Logf("kube-apiserver %s: %s (cached)", kubeVersion, bin)
		return bin
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	// One build at a time across processes.
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building kube-apiserver %s into %s (cold: about 7 minutes and 2.2 GB of memory)", kubeVersion, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	goCmd := func(args ...string) []byte {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	// k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...)
	// with ./staging/src/...; a module requiring it replaces each with its
	// release instead.
	var dl struct{ GoMod string }
	if err := json.Unmarshal(goCmd("mod", "download", "-json", "k8s.io/kubernetes@"+kubeVersion), &dl); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(dl.GoMod)
	if err != nil {
		t.Fatal(err)
	}
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module electord.local/kubeapiserverbuild\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", kubeVersion)
	staging := regexp.MustCompile(`(?m)^\s*(k8s\.io/\S+)\s+=>\s+\./staging/`).FindAllStringSubmatch(string(mod), -1)
	if len(staging) == 0 {
		t.Fatalf("%s: no staging replacements found", dl.GoMod)
	}
	for _, m := range staging {
		fmt.Fprintf(&gomod, "\t%s => %s %s\n", m[1], m[1], stagingVersion)
	}
	gomod.WriteString(")\n")
	tools := "//go:build tools\n\npackage build\n\nimport _ \"k8s.io/kubernetes/cmd/kube-apiserver\"\n"
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "tools.go"), []byte(tools), 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd("mod", "tidy")
	start := time.Now()
	goCmd("build", "-trimpath", "-o", bin+".tmp", "k8s.io/kubernetes/cmd/kube-apiserver")
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built kube-apiserver in %v", time.Since(start).Round(time.Second))
	return bin
}

// etcdBinary returns Debian's etcd, installing etcd-server if it is missing.
func etcdBinary(t *testing.T) string {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	t.Log("etcd not found: installing Debian's etcd-server with apt-get (apt-get update; apt-get install -y etcd-server)")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "etcd-server"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd-server installed, but no etcd on PATH: %v", err)
	}
	return p
}

// controlPlaneBinaries skips the test where faultnet cannot run (it needs
// root, ip and iptables for network namespaces), has every faultnet
// cluster closed on an interrupt, and returns the kube-apiserver and etcd
// binaries.
func controlPlaneBinaries(t *testing.T) (apiserver, etcd string) {
	if err := faultnet.Available(); err != nil {
		t.Skipf("needs root, ip and iptables for network namespaces: %v", err)
	}
	t.Cleanup(faultnet.CleanupOnSignal())
	return kubeAPIServer(t), etcdBinary(t)
}

// controlPlane is etcd and kube-apiserver running in a faultnet cluster's
// hub namespace.
type controlPlane struct {
	dir    string
	caPEM  []byte
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	names  []string
	procs  []*exec.Cmd
	exited []chan struct{}
}

// The admission a production cluster runs. kube-apiserver turns on its
// default plugins by itself (NamespaceLifecycle, LimitRanger,
// ServiceAccount, PodSecurity, Priority, DefaultTolerationSeconds,
// DefaultStorageClass, StorageObjectInUseProtection, RuntimeClass,
// DefaultIngressClass, the webhooks and ValidatingAdmissionPolicy,
// ResourceQuota, ...: the log lists them, and the manifests test checks
// the ones it relies on); --enable-admission-plugins adds these, which
// are off by default and on in the clusters named:
var extraAdmissionPlugins = []string{
	// kubeadm, EKS, GKE, AKS: a kubelet may change only its own node and
	// the pods bound to it (with the Node authorizer, below).
	"NodeRestriction",
	// OpenShift: setting ownerReferences needs delete on the owner. The
	// leader slice sets none, so the Role needs no delete (rbac.yaml).
	"OwnerReferencesPermissionEnforcement",
	// The CIS Kubernetes Benchmark (1.2.11): every pod's imagePullPolicy
	// becomes Always, so a pod cannot use an image another tenant pulled.
	"AlwaysPullImages",
	// Hardened clusters since CVE-2020-8554: no Service may set
	// externalIPs.
	"DenyServiceExternalIPs",
}

// admissionConfig configures PodSecurity as a hardened cluster does:
// every namespace enforces the restricted level unless it is labelled
// otherwise, and a request that would break it in a workload's pod
// template (a StatefulSet's) is answered with a warning, which the
// manifests test treats as a failure too. The manifests claim restricted
// (non-root, no capabilities, the runtime's seccomp profile, no privilege
// escalation); nothing here exempts them.
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: PodSecurity
    configuration:
      apiVersion: pod-security.admission.config.k8s.io/v1
      kind: PodSecurityConfiguration
      defaults:
        enforce: restricted
        enforce-version: latest
        audit: restricted
        audit-version: latest
        warn: restricted
        warn-version: latest
      exemptions:
        usernames: []
        runtimeClasses: []
        namespaces: []
`

// startControlPlane starts etcd and kube-apiserver in c's hub namespace
// and waits (bounded) for the API server to be ready. Both are stopped by
// a cleanup registered here (so before c.Close if c's was registered
// first), and get SIGKILL if the test process dies.
func startControlPlane(t *testing.T, c *faultnet.Cluster, apiserver, etcd string) *controlPlane {
	dir := workDir(t, "controlplane")
	cp := &controlPlane{dir: dir, dial: c.DialContext}
	t.Cleanup(cp.stop)
	cp.writePKI(t)
	hub := c.Hub()
	cp.start(t, "etcd", hub, etcd,
		"--name", "e2e", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-cluster", fmt.Sprintf("e2e=http://127.0.0.1:%d", etcdPeerPort),
	)
	issuer := "https://kubernetes.default.svc.cluster.local"
	cp.start(t, "kube-apiserver", hub, apiserver,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiPort), "--advertise-address", hubIP,
		"--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-private-key-file", filepath.Join(dir, "server.key"),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--anonymous-auth=false",
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", strings.Join(extraAdmissionPlugins, ","),
		"--admission-control-config-file", filepath.Join(dir, "admission.yaml"),
		"--service-account-issuer", issuer,
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=1",
	)
	admin := kubernetes.NewForConfigOrDie(cp.restConfig(adminToken))
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil {
			break
		}
		for i, ch := range cp.exited {
			select {
			case <-ch:
				t.Fatalf("%s exited while starting; its log:\n%s", cp.names[i], tail(filepath.Join(dir, cp.names[i]+".log"), 40))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready within 3m: %v; its log:\n%s", err, tail(filepath.Join(dir, "kube-apiserver.log"), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("kube-apiserver %s ready at https://%s:%d (etcd %s), logs in %s", kubeVersion, hubIP, apiPort, etcd, dir)
	return cp
}

func (cp *controlPlane) start(t *testing.T, name, ns, bin string, args ...string) {
	log, err := os.Create(filepath.Join(cp.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// ip execs the binary in place: the pid is the binary's.
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	cp.names = append(cp.names, name)
	cp.procs = append(cp.procs, cmd)
	cp.exited = append(cp.exited, done)
}

// stop kills the API server, then etcd, and waits for them (bounded).
func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		syscall.Kill(-cp.procs[i].Process.Pid, syscall.SIGKILL)
		select {
		case <-cp.exited[i]:
		case <-time.After(10 * time.Second):
		}
	}
}

// restConfig reaches the API server from the hub namespace as the holder
// of token.
func (cp *controlPlane) restConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            fmt.Sprintf("https://%s:%d", hubIP, apiPort),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM},
		Dial:            cp.dial,
		Timeout:         15 * time.Second,
		QPS:             200, Burst: 400,
	}
}

// writeKubeconfig writes a kubeconfig for token, as a node in its own
// namespace reaches the API server.
func (cp *controlPlane) writeKubeconfig(t *testing.T, path, user, token string) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://%s:%d", hubIP, apiPort), CertificateAuthorityData: cp.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// writePKI writes a CA, the API server's serving certificate, the service
// account signing key, the static token file (the test's admin), and the
// admission configuration.
func (cp *controlPlane) writePKI(t *testing.T) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "electord-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	cp.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP(hubIP), net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKeyDER, _ := x509.MarshalECPrivateKey(srvKey)
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	files := map[string][]byte{
		"ca.crt":     cp.caPEM,
		"server.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"server.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		// token,user,uid,"group": the test's admin.
		"tokens.csv":     []byte(adminToken + `,e2e-admin,e2e-admin,"system:masters"` + "\n"),
		"admission.yaml": []byte(admissionConfig),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(cp.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// workDirPrefix starts the name of every directory the test makes in the
// temp dir: workDirPrefix + "<pid>-<what>-<random>".
const workDirPrefix = "electord-e2e-k8s-"

// workDir makes a directory removed when the test ends. An interrupted run
// (faultnet's signal cleanup exits at once) leaves it: the next run removes
// every such directory whose process is gone.
func workDir(t *testing.T, what string) string {
	sweepWorkDirs(t)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%s-", workDirPrefix, os.Getpid(), what))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func sweepWorkDirs(t *testing.T) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, dir := range old {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(dir), workDirPrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		t.Logf("removing %s, left by an interrupted run", dir)
		os.RemoveAll(dir)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
