package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/electord/electord/node"
)

// Health checks, served on health-addr (issue 13):
//
//	GET /livez    the instance loop is alive: it answered a probe within LoopDeadline
//	GET /readyz   loop, term and gossip: the node can take part in elections
//	GET /healthz  every check (today the same as /readyz)
//
// Each answers 200 when every check passes, else 503, with a text body
// naming each check and why it failed (JSON with ?format=json or an Accept
// header asking for application/json). Leadership plays no part: a
// follower is as ready as the leader, so a StatefulSet's rolling update
// moves on and a Service selecting the pods sees all of them. The same
// readiness answers grpc.health.v1 on the API port (see registerGRPCHealth).

// LoopDeadline bounds the wait for the instance loop's answer to a probe.
// A loop that does not answer in time is reported not alive: kubelet probes
// should allow at least a second (timeoutSeconds: 1, the default) and
// several failures (failureThreshold: 3) before restarting the container.
const LoopDeadline = 500 * time.Millisecond

// Check is one health check's outcome.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Detail says why it failed, or what it saw when it passed.
	Detail string `json:"detail,omitempty"`
}

// HealthReport is the outcome of a set of checks.
type HealthReport struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Failed lists the failed checks as "name: detail", "" when none failed.
func (r HealthReport) Failed() string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return strings.Join(out, "; ")
}

// Live is the liveness check: the instance loop answers.
func (d *Daemon) Live(ctx context.Context) HealthReport {
	_, loop := d.probeLoop(ctx)
	return report(loop)
}

// Ready is the readiness check: the loop answers, the term is persisted,
// and gossip is joined. It never depends on who leads.
func (d *Daemon) Ready(ctx context.Context) HealthReport {
	p, loop := d.probeLoop(ctx)
	if !loop.OK {
		return report(loop,
			Check{Name: "term", Detail: "unknown: the loop did not answer"},
			Check{Name: "gossip", Detail: "unknown: the loop did not answer"})
	}
	return report(loop, d.termCheck(p), d.gossipCheck(p))
}

func report(checks ...Check) HealthReport {
	r := HealthReport{OK: true, Checks: checks}
	for _, c := range checks {
		r.OK = r.OK && c.OK
	}
	return r
}

func (d *Daemon) probeLoop(ctx context.Context) (node.ProbeInfo, Check) {
	ctx, cancel := context.WithTimeout(ctx, LoopDeadline)
	defer cancel()
	start := time.Now()
	p, err := d.Node.Probe(ctx)
	took := time.Since(start)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return p, Check{Name: "loop", Detail: fmt.Sprintf("the instance loop did not answer within %v", LoopDeadline)}
	case errors.Is(err, node.ErrStopped):
		return p, Check{Name: "loop", Detail: "the instance loop has stopped"}
	case err != nil:
		return p, Check{Name: "loop", Detail: "probe: " + err.Error()}
	}
	return p, Check{Name: "loop", OK: true, Detail: "answered in " + took.Round(time.Microsecond).String()}
}

// termCheck: the last write of the term succeeded (a node that cannot
// persist its term takes no part in elections; see node.storeFailed).
func (d *Daemon) termCheck(p node.ProbeInfo) Check {
	c := Check{Name: "term"}
	errs := d.Node.Counters().PersistErrors.Load()
	switch {
	case p.StoreErr != nil:
		c.Detail = fmt.Sprintf("cannot persist the term (%d failed writes so far): %v", errs, p.StoreErr)
	case d.Node.Health() != nil:
		c.Detail = d.Node.Health().Error()
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("persisted term %v, leadership term %v", p.Durable.Term, p.Durable.LeaderTerm)
		if d.Config.DataDir == "" {
			c.Detail += " (in memory: no data-dir)"
		}
	}
	return c
}

// gossipCheck: the node is in the cluster. Its gossip runs (not killed, not
// standing down after a membership conflict) and, if it was given seeds to
// join, it has found another member alive or knows a leader (a cluster of
// one whose seed names only itself elects itself). A node started with no
// seeds is the first of its cluster: running gossip is enough.
func (d *Daemon) gossipCheck(p node.ProbeInfo) Check {
	c := Check{Name: "gossip"}
	switch {
	case p.Killed:
		c.Detail = "the node is killed or stood down (electctl revive, or fix the conflict the log names)"
	case !p.Gossip:
		c.Detail = "gossip is not running"
	case len(d.Config.Join) > 0 && p.AliveMembers == 0 && p.Leader == 0:
		c.Detail = fmt.Sprintf("not joined yet: no other member alive and no leader known (seeds %s)", strings.Join(d.Config.Join, ","))
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("%d other members alive", p.AliveMembers)
	}
	return c
}

func (d *Daemon) mountHealth(mux *http.ServeMux) {
	serve := func(name string, check func(context.Context) HealthReport) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			writeHealth(w, r, name, check(r.Context()))
		}
	}
	mux.Handle("GET /livez", serve("livez", d.Live))
	mux.Handle("GET /readyz", serve("readyz", d.Ready))
	mux.Handle("GET /healthz", serve("healthz", d.Ready))
}

func writeHealth(w http.ResponseWriter, r *http.Request, name string, rep HealthReport) {
	code := http.StatusOK
	if !rep.OK {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(rep)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	var b strings.Builder
	for _, c := range rep.Checks {
		mark := "[+]"
		if !c.OK {
			mark = "[-]"
		}
		fmt.Fprintf(&b, "%s%s %s\n", mark, c.Name, c.Detail)
	}
	if rep.OK {
		fmt.Fprintf(&b, "%s ok\n", name)
	} else {
		fmt.Fprintf(&b, "%s failed\n", name)
	}
	w.Write([]byte(b.String()))
}
