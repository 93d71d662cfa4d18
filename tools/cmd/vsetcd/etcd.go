package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdSide is the etcd half: one single-member etcd server on loopback and
// n etcdcandidate processes campaigning in one election.
type etcdSide struct {
	sys       *system
	server    *child
	endpoint  string
	version   string // the server's, from its Status
	minTTL    int64  // what the server grants for a 1-second lease
	ttl       int64  // what the candidates ask for
	granted   map[int64]bool
	grantedMu sync.Mutex
}

// startEtcd starts the server (etcdBin) with its data in dir, probes its
// minimum lease TTL and starts n candidates (candBin) asking for ttl seconds
// (0: that minimum).
func startEtcd(etcdBin, candBin, dir string, n int, ttl int64) (*etcdSide, error) {
	ps, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", ps[0]), fmt.Sprintf("http://127.0.0.1:%d", ps[1])
	logw, err := logFile(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	srv, err := startChild(etcdBin, []string{
		"--name", "vsetcd", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "vsetcd=" + peer, "--initial-cluster-state", "new",
		"--log-level", "warn",
	}, logw, logw, func(*child) { logw.Close() })
	if err != nil {
		logw.Close()
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	e := &etcdSide{server: srv, endpoint: strings.TrimPrefix(client, "http://"), granted: map[int64]bool{}}
	if err := e.probe(); err != nil {
		return nil, err
	}
	e.ttl = ttl
	if e.ttl == 0 {
		e.ttl = e.minTTL
	}
	e.sys = &system{name: "etcd", note: fmt.Sprintf("etcd %s, one member; %d candidates, concurrency.NewSession(WithTTL(%d))", e.version, n, e.ttl)}
	e.sys.start = func(m *member) error { return e.startCandidate(candBin, dir, m) }
	for i := 1; i <= n; i++ {
		m := &member{name: "c" + strconv.Itoa(i), sys: e.sys}
		e.sys.members = append(e.sys.members, m)
		if err := e.sys.startMember(m); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// probe waits (up to 20 s) for the server to answer, reads its version and
// grants a 1-second lease to learn the smallest TTL the server gives.
func (e *etcdSide) probe() error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	end := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, e.endpoint)
		cancel()
		if err == nil {
			e.version = st.Version
			break
		}
		if time.Now().After(end) {
			return fmt.Errorf("etcd at %s did not answer within 20s: %v", e.endpoint, err)
		}
		select {
		case <-e.server.exited:
			return fmt.Errorf("etcd exited at start (see etcd.log): %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := cli.Grant(ctx, 1)
	if err != nil {
		return fmt.Errorf("etcd lease grant: %w", err)
	}
	e.minTTL = g.TTL
	_, err = cli.Revoke(ctx, g.ID)
	return err
}

func (e *etcdSide) startCandidate(candBin, dir string, m *member) error {
	logw, err := logFile(filepath.Join(dir, "candidate-"+m.name+".log"))
	if err != nil {
		return err
	}
	out := &lineWriter{fn: func(s string) {
		io.WriteString(logw, s+"\n")
		l, err := parseCandidateLine(s)
		if err != nil {
			logf("etcd %s: %v", m.name, err)
			return
		}
		switch l.kind {
		case "ready":
			e.grantedMu.Lock()
			e.granted[l.ttl] = true
			e.grantedMu.Unlock()
			m.setReady()
		case "observe":
			m.setView(view{leader: l.leader, term: l.rev, at: l.at})
		case "elected":
			m.setSelf(true, l.at)
		case "error":
			logf("etcd %s: error: %s", m.name, l.text)
		}
	}}
	p, err := startChild(candBin, []string{
		"--endpoints", e.endpoint, "--name", m.name, "--ttl", strconv.FormatInt(e.ttl, 10),
	}, out, logw, func(c *child) { m.exited(c); logw.Close() })
	if err != nil {
		logw.Close()
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

// grantedTTLs lists the lease TTLs the candidates' sessions were granted.
func (e *etcdSide) grantedTTLs() string {
	e.grantedMu.Lock()
	defer e.grantedMu.Unlock()
	var s []string
	for t := range e.granted {
		s = append(s, strconv.FormatInt(t, 10))
	}
	return strings.Join(s, ", ")
}

// stop ends the candidates (SIGTERM), then the server.
func (e *etcdSide) stop() {
	if e.sys != nil {
		stopAll(e.sys)
	}
	e.server.stop(syscall.SIGTERM, 5*time.Second)
}

// stopAll SIGTERMs every running member of s and waits for them.
func stopAll(s *system) {
	var ps []*child
	for _, m := range s.members {
		m.mu.Lock()
		p := m.proc
		m.mu.Unlock()
		if p != nil {
			m.markStopped()
			ps = append(ps, p)
			p.signal(syscall.SIGTERM)
		}
	}
	for _, p := range ps {
		p.stop(syscall.SIGTERM, 5*time.Second)
	}
}

// etcdVersion is `etcd --version`'s first line.
func etcdVersion(bin string) string {
	b, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return err.Error()
	}
	return strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
}
