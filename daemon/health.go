package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// Health checks, served on health-addr:
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

// probeShare coalesces probes of the loop: every /livez, /readyz,
// /healthz and grpc health Check asks the instance loop, and health-addr
// may be probed by anyone the NetworkPolicy lets in. Callers that arrive
// while a probe is running share its answer, so a flood of probes keeps at
// most one closure in the loop's command queue at a time (an answer is not
// reused once given: a probe after a stop or a failed write sees it).
type probeShare struct {
	mu   sync.Mutex
	last *probeCall
}

type probeCall struct {
	done chan struct{}
	p    node.ProbeInfo
	err  error
	took time.Duration
}

func (s *probeShare) get(ctx context.Context, probe func(context.Context) (node.ProbeInfo, error)) (*probeCall, error) {
	s.mu.Lock()
	c := s.last
	running := false
	if c != nil {
		select {
		case <-c.done:
		default:
			running = true
		}
	}
	if !running {
		c = &probeCall{done: make(chan struct{})}
		s.last = c
		go func() {
			// Not the caller's context: others wait on this probe too.
			pctx, cancel := context.WithTimeout(context.Background(), LoopDeadline)
			defer cancel()
			start := time.Now()
			c.p, c.err = probe(pctx)
			c.took = time.Since(start)
			close(c.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-c.done:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *Daemon) probeLoop(ctx context.Context) (node.ProbeInfo, Check) {
	ctx, cancel := context.WithTimeout(ctx, LoopDeadline+50*time.Millisecond)
	defer cancel()
	var (
		p    node.ProbeInfo
		took time.Duration
	)
	c, err := d.probes.get(ctx, d.Node.Probe)
	if err == nil {
		p, err, took = c.p, c.err, c.took
	}
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

// registerGRPCHealth serves grpc.health.v1 on the API server s, for `grpc:`
// probes: the service "" (the node) and "electord.v1.Elector" are SERVING
// while the node is ready (Ready; never leadership) and NOT_SERVING
// otherwise. Check and List compute readiness at each call; while a Watch
// is open it is recomputed every HealthRefresh (nothing runs while no one
// watches, so idle nodes pay nothing). The kubelet's grpc probe speaks no
// TLS, so with the API on mutual TLS it cannot reach this: probe /readyz
// and /livez on health-addr instead. Check is authorized like GetLeader
// (any certificate of the cluster, see api.Security): the TLS handshake
// already demands a client certificate before any method is reached, so
// exempting Check from the interceptor would let in no one more, and a
// node's readiness is cluster information like who leads.
func (d *Daemon) registerGRPCHealth(s *grpc.Server) {
	healthpb.RegisterHealthServer(s, &grpcHealth{Server: health.NewServer(), d: d})
}

// HealthRefresh is how often an open gRPC health Watch sees readiness
// recomputed.
const HealthRefresh = time.Second

// grpcServices are the service names the gRPC health service answers for.
var grpcServices = []string{"", electordv1.Elector_ServiceDesc.ServiceName}

type grpcHealth struct {
	*health.Server
	d *Daemon

	mu       sync.Mutex
	watchers int
	stop     chan struct{} // closed when the last watcher goes
}

func (h *grpcHealth) status(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.d.Ready(ctx).OK {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, svc := range grpcServices {
		h.SetServingStatus(svc, st)
	}
	return st
}

func (h *grpcHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if !slices.Contains(grpcServices, req.GetService()) {
		return nil, grpcstatus.Errorf(codes.NotFound, "unknown service %q: this server answers for %q (the node) and %q",
			req.GetService(), "", grpcServices[1])
	}
	return &healthpb.HealthCheckResponse{Status: h.status(ctx)}, nil
}

func (h *grpcHealth) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	h.status(ctx)
	return h.Server.List(ctx, req)
}

func (h *grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.status(stream.Context())
	h.mu.Lock()
	if h.watchers++; h.watchers == 1 {
		h.stop = make(chan struct{})
		go h.refresh(h.stop)
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.watchers--; h.watchers == 0 {
			close(h.stop)
		}
		h.mu.Unlock()
	}()
	return h.Server.Watch(req, stream)
}

// refresh keeps open Watches current until stop, or for good once the
// node's loop ends.
func (h *grpcHealth) refresh(stop <-chan struct{}) {
	t := time.NewTicker(HealthRefresh)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			h.status(context.Background())
		case <-stop:
			return
		case <-h.d.Node.Done():
			h.Shutdown() // NOT_SERVING for good
			return
		}
	}
}
