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

// etcdSide is the etcd half: an etcd cluster of one or more members on
// loopback and n etcdcandidate processes campaigning in one election,
// candidate i connected to member i only (members taken in turn when there
// are fewer than candidates).
type etcdSide struct {
	sys       *system
	servers   []*child
	endpoints []string          // each member's client address
	endpoint  map[string]string // candidate name: the member's address it uses
	version   string            // the server's, from its Status
	minTTL    int64             // what the server grants for a 1-second lease
	ttl       int64             // what the candidates ask for
	granted   map[int64]bool
	grantedMu sync.Mutex
}

// electionPrefix is the key prefix of the election, passed to every
// candidate and to the harness's observer.
const electionPrefix = "/vsetcd/election"

// startEtcd starts a cluster of members etcd servers (etcdBin, with the
// extra flags args) with their data in dir, probes its minimum lease TTL and
// starts n candidates (candBin) asking for ttl seconds (0: that minimum).
func startEtcd(etcdBin, candBin, dir string, n, members int, ttl int64, args []string) (*etcdSide, error) {
	ps, err := freePorts(2 * members)
	if err != nil {
		return nil, err
	}
	e := &etcdSide{endpoint: map[string]string{}, granted: map[int64]bool{}}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i+1, ps[2*i+1]))
	}
	for i := range members {
		name := fmt.Sprintf("e%d", i+1)
		client, peer := fmt.Sprintf("http://127.0.0.1:%d", ps[2*i]), fmt.Sprintf("http://127.0.0.1:%d", ps[2*i+1])
		logw, err := logFile(filepath.Join(dir, "etcd-"+name+".log"))
		if err != nil {
			e.stop()
			return nil, err
		}
		srv, err := startChild(etcdBin, append([]string{
			"--name", name, "--data-dir", filepath.Join(dir, "etcd-data-"+name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--log-level", "warn",
		}, args...), logw, logw, func(*child) { logw.Close() })
		if err != nil {
			logw.Close()
			e.stop()
			return nil, fmt.Errorf("starting etcd %s: %w", name, err)
		}
		e.servers = append(e.servers, srv)
		e.endpoints = append(e.endpoints, strings.TrimPrefix(client, "http://"))
	}
	if err := e.probe(); err != nil {
		e.stop()
		return nil, err
	}
	e.ttl = ttl
	if e.ttl == 0 {
		e.ttl = e.minTTL
	}
	through := "candidate i through member i"
	if members == 1 {
		through = "every candidate through it"
	}
	e.sys = &system{name: "etcd", note: fmt.Sprintf("etcd %s, %d member(s)%s; %d candidates, concurrency.NewSession(WithTTL(%d)), %s",
		e.version, members, argsNote(args), n, e.ttl, through)}
	e.sys.start = func(m *member) error { return e.startCandidate(candBin, dir, m) }
	for i := 1; i <= n; i++ {
		m := &member{name: "c" + strconv.Itoa(i), sys: e.sys}
		e.endpoint[m.name] = e.endpoints[(i-1)%members]
		e.sys.members = append(e.sys.members, m)
		if err := e.sys.startMember(m); err != nil {
			e.stop()
			return nil, err
		}
	}
	return e, nil
}

// probe waits (up to 20 s) until every member answers and knows a Raft
// leader, reads the version and grants a 1-second lease to learn the
// smallest TTL the cluster gives.
func (e *etcdSide) probe() error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	end := time.Now().Add(20 * time.Second)
	for i, ep := range e.endpoints {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, ep)
			cancel()
			if err == nil && st.Leader == 0 {
				err = fmt.Errorf("no Raft leader yet")
			}
			if err == nil {
				e.version = st.Version
				break
			}
			if time.Now().After(end) {
				return fmt.Errorf("etcd at %s not ready within 20s: %v", ep, err)
			}
			select {
			case <-e.servers[i].exited:
				return fmt.Errorf("etcd e%d exited at start (see etcd-e%d.log): %v", i+1, i+1, err)
			case <-time.After(100 * time.Millisecond):
			}
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
		"--endpoints", e.endpoint[m.name], "--name", m.name, "--ttl", strconv.FormatInt(e.ttl, 10),
		"--prefix", electionPrefix,
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

// stop ends the candidates (SIGTERM), then the servers.
func (e *etcdSide) stop() {
	if e.sys != nil {
		stopAll(e.sys)
	}
	for _, s := range e.servers {
		s.signal(syscall.SIGTERM)
	}
	for _, s := range e.servers {
		s.stop(syscall.SIGTERM, 5*time.Second)
	}
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
