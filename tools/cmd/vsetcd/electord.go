package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// electordSide is the electord half: n electord processes on loopback with
// the default configuration, all joining node 1, watched through each node's
// sidecar GET /watch (Server-Sent Events).
type electordSide struct {
	sys   *system
	args  map[string][]string // member name: its command line
	http  map[string]string   // member name: its sidecar address
	hc    *http.Client
	extra []string
}

func startElectord(bin, dir string, n int, extra []string) (*electordSide, error) {
	e := &electordSide{args: map[string][]string{}, http: map[string]string{}, hc: &http.Client{}, extra: extra}
	e.sys = &system{name: "electord", note: fmt.Sprintf("%d electord processes, default configuration%s", n, argsNote(extra))}
	e.sys.start = func(m *member) error { return e.startNode(bin, dir, m) }
	var seed string
	for i := 1; i <= n; i++ {
		ps, err := freePorts(4)
		if err != nil {
			return nil, err
		}
		name := strconv.Itoa(i)
		gossip := fmt.Sprintf("127.0.0.1:%d", ps[2])
		e.http[name] = fmt.Sprintf("127.0.0.1:%d", ps[3])
		e.args[name] = []string{
			"--id", name,
			"--api-addr", fmt.Sprintf("127.0.0.1:%d", ps[0]),
			"--peer-addr", fmt.Sprintf("127.0.0.1:%d", ps[1]),
			"--gossip-addr", gossip,
			"--http-addr", e.http[name],
			"--data-dir", filepath.Join(dir, "node-"+name),
			"--log-level", "warn",
		}
		if seed != "" {
			e.args[name] = append(e.args[name], "--join", seed)
		} else {
			seed = gossip
		}
		e.args[name] = append(e.args[name], extra...)
		m := &member{name: name, sys: e.sys}
		e.sys.members = append(e.sys.members, m)
		if err := e.sys.startMember(m); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func argsNote(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return " plus `" + strings.Join(extra, " ") + "`"
}

// seedAll makes every node, on its next start, join every other node (node
// 1 started first and joined nobody; restarted alone it must find the rest).
func (e *electordSide) seedAll() {
	for _, m := range e.sys.members {
		var seeds []string
		for _, o := range e.sys.members {
			if o != m {
				args := e.args[o.name]
				for i, a := range args {
					if a == "--gossip-addr" {
						seeds = append(seeds, args[i+1])
					}
				}
			}
		}
		e.args[m.name] = append(e.args[m.name], "--join", strings.Join(seeds, ","))
	}
}

func (e *electordSide) startNode(bin, dir string, m *member) error {
	logw, err := logFile(filepath.Join(dir, "node-"+m.name+".log"))
	if err != nil {
		return err
	}
	p, err := startChild(bin, e.args[m.name], logw, logw, func(c *child) { m.exited(c); logw.Close() })
	if err != nil {
		logw.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.proc, m.stopObs = p, cancel
	m.mu.Unlock()
	go e.watch(ctx, m)
	return nil
}

// watch follows m's /watch stream, reconnecting (every 10 ms) until ctx ends;
// each event's time is when the harness read it.
func (e *electordSide) watch(ctx context.Context, m *member) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.http[m.name]+"/watch", nil)
		if resp, err := e.hc.Do(req); err == nil {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				now := time.Now()
				ev, ok, err := parseSSEData(sc.Text())
				if err != nil {
					logf("electord %s: %v", m.name, err)
				}
				if !ok {
					continue
				}
				m.setView(view{leader: ev.leaderName(), term: ev.Term, at: now})
				m.setSelf(ev.Self && ev.leaderName() == m.name, now)
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (e *electordSide) stop() { stopAll(e.sys) }
