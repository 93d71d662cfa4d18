package faultnet

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/electord/electord/tools/internal/repo"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dockerDriver runs every node as a pod would run: a "pod" container
// (tools/cmd/pause, like Kubernetes' pause container) holds the node's
// address on a user-defined Docker network made for the cluster, and the
// node's electord container runs in its network namespace. So when electord
// dies (SIGKILL of its container) its address stays up and the kernel
// refuses connections to it, as on a live host or in a pod whose container
// crashed; a container that owned its namespace would take the address
// with it, and peers would see a silent host instead. Links are cut with the
// same iptables rules as in namespaces, entered with nsenter into the pod's
// network namespace; pause is docker pause of the electord container (the
// cgroup freezer); the observer dials the pods' addresses from the host,
// through the network's bridge.
//
// Isolation uses the rules too, not `docker network disconnect`: a
// disconnected container is out of the observer's sight as well, and the
// checker needs to see what an isolated node answers.
type dockerDriver struct {
	network string
	image   string
}

// dockerSubnet is the cluster's network: 10.78.<k>.0/24 (node i is .10+i), k from the pid and
// the cluster's sequence number (Docker refuses overlapping networks; setup
// tries the next k).
func dockerSubnet(k int) string { return fmt.Sprintf("10.78.%d.", k%250) }

func (d *dockerDriver) setup(c *Cluster) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	img, err := dockerImage(c.cfg.Binary, c.dir)
	if err != nil {
		return err
	}
	d.image = img
	d.network = strings.TrimSuffix(c.name, "-")
	var prefix string
	k := os.Getpid() + int(seq.Load())
	for try := 0; ; try++ {
		prefix = dockerSubnet(k + try)
		err := run("docker", "network", "create", "--driver", "bridge", "--subnet", prefix+"0/24", d.network)
		if err == nil {
			break
		}
		if try == 20 {
			return err
		}
	}
	for _, nd := range c.Nodes {
		nd.IP = prefix + strconv.Itoa(10+nd.ID) // .1 is the gateway
	}
	return nil
}

// dockerImage builds (once per binary content) an image FROM scratch that
// holds the electord binary and tools/cmd/pause, the pod's pause process.
func dockerImage(bin, dir string) (string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	io.WriteString(h, "with /pause") // images built before the pause binary moved out of electord differ
	tag := fmt.Sprintf("efn-electord:%x", h.Sum(nil)[:6])
	if exec.Command("docker", "image", "inspect", tag).Run() == nil {
		return tag, nil
	}
	ctx := filepath.Join(dir, "image")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(ctx)
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(ctx, "electord"), data, 0o755); err != nil {
		return "", err
	}
	if err := repo.BuildTool(filepath.Join(ctx, "pause"), true, "./cmd/pause"); err != nil {
		return "", err
	}
	df := "FROM scratch\nCOPY electord /electord\nCOPY pause /pause\nENTRYPOINT [\"/electord\"]\n"
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", err
	}
	if err := run("docker", "build", "-q", "-t", tag, ctx); err != nil {
		return "", err
	}
	return tag, nil
}

func (d *dockerDriver) container(c *Cluster, nd *Node) string {
	return c.name + "n" + strconv.Itoa(nd.ID)
}

// pod is the name of node nd's pod container, which holds its address.
func (d *dockerDriver) pod(c *Cluster, nd *Node) string { return d.container(c, nd) + "-pod" }

func (d *dockerDriver) dataDir(*Cluster, *Node) string { return "/data" }

func (d *dockerDriver) start(c *Cluster, nd *Node, log *os.File) (proc, error) {
	name, pod := d.container(c, nd), d.pod(c, nd)
	if nd.starts == 0 {
		if err := run("docker", "run", "-d", "--name", pod, "--network", d.network, "--ip", nd.IP, "--entrypoint", "/pause", d.image); err != nil {
			return nil, err
		}
		args := append([]string{"create", "--name", name, "--network", "container:" + pod, d.image}, nd.Args...)
		if err := run("docker", args...); err != nil {
			return nil, err
		}
	}
	if err := run("docker", "start", name); err != nil {
		return nil, err
	}
	p, err := startCmd(exec.Command("docker", "wait", name), log)
	if err != nil {
		return nil, err
	}
	dp := &dockerProc{name: name, wait: p}
	if out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", name).Output(); err == nil {
		dp.pid, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	}
	return dp, nil
}

// dockerProc is one run of a container; `docker wait` ends when it stops.
type dockerProc struct {
	name string
	wait *cmdProc
	// pid is electord's pid on the host: signals other than pause and
	// unpause go to it directly, at once, as a crash or kill on the host
	// would (docker kill goes through the daemon, tens of ms later).
	pid int
}

func (p *dockerProc) signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGSTOP:
		return run("docker", "pause", p.name)
	case syscall.SIGCONT:
		if out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Paused}}", p.name).Output(); strings.TrimSpace(string(out)) != "true" {
			return nil
		}
		return run("docker", "unpause", p.name)
	}
	if p.pid > 0 {
		return syscall.Kill(p.pid, sig)
	}
	return run("docker", "kill", "-s", strconv.Itoa(int(sig)), p.name)
}

func (p *dockerProc) exited() <-chan struct{} { return p.wait.exited() }
func (p *dockerProc) String() string          { return "container " + p.name }

func (d *dockerDriver) rules(nd *Node, rules string) error {
	// The pod holds the namespace, whether electord runs or not.
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", nd.proc.(*dockerProc).name+"-pod").Output()
	if err != nil {
		return fmt.Errorf("docker inspect: %w", err)
	}
	pid := strings.TrimSpace(string(out))
	if pid == "0" {
		return fmt.Errorf("container of node %d not running", nd.ID)
	}
	cmd := exec.Command("nsenter", "-t", pid, "-n", "iptables-restore")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore in node %d's container: %v: %s", nd.ID, err, out)
	}
	return nil
}

func (d *dockerDriver) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var dl net.Dialer
	return dl.DialContext(ctx, network, addr)
}

func (d *dockerDriver) teardown(c *Cluster) error {
	var errs []string
	for _, nd := range c.Nodes {
		name := d.container(c, nd)
		if nd.starts > 0 {
			if f, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", nd.ID)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
				cmd := exec.Command("docker", "logs", name)
				cmd.Stdout, cmd.Stderr = f, f
				cmd.Run()
				f.Close()
			}
		}
		for _, cn := range []string{name, d.pod(c, nd)} {
			if err := exec.Command("docker", "rm", "-f", cn).Run(); err != nil && nd.starts > 0 {
				errs = append(errs, fmt.Sprintf("docker rm %s: %v", cn, err))
			}
		}
	}
	if d.network != "" {
		if err := exec.Command("docker", "network", "rm", d.network).Run(); err != nil {
			errs = append(errs, fmt.Sprintf("docker network rm %s: %v", d.network, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("faultnet: %s", strings.Join(errs, "; "))
	}
	return nil
}

// sweepDocker removes the containers and networks named with Prefix whose
// creating process is gone.
func sweepDocker(logf func(string, ...any)) {
	if _, err := exec.LookPath("docker"); err != nil {
		return
	}
	list := func(args ...string) []string {
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			return nil
		}
		return strings.Fields(string(out))
	}
	for _, name := range list("ps", "-a", "--filter", "name=^"+Prefix, "--format", "{{.Names}}") {
		if stale(name) {
			err := exec.Command("docker", "rm", "-f", name).Run()
			if logf != nil {
				logf("faultnet: swept leftover container %s (%v)", name, err)
			}
		}
	}
	for _, name := range list("network", "ls", "--filter", "name=^"+Prefix, "--format", "{{.Name}}") {
		if stale(name) {
			err := exec.Command("docker", "network", "rm", name).Run()
			if logf != nil {
				logf("faultnet: swept leftover network %s (%v)", name, err)
			}
		}
	}
}
