package metrics

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// API counts the client API's calls (gRPC and the sidecar's HTTP), its open
// watches and the connections of the listeners it is given. Wire it in
// before serving: GRPCOptions on the API server, Handler around the
// sidecar's handler, Listener around each listener.
type API struct {
	calls    *prometheus.CounterVec
	watchers *prometheus.GaugeVec
	// httpCalls caches calls' counters by httpKey, so a sidecar request
	// costs a map read, not a label hash and a status formatted.
	httpCalls sync.Map

	mu  sync.Mutex
	lis []*countedListener
}

// NewAPI returns the counters, zero.
func NewAPI() *API {
	return &API{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "api_calls_total",
			Help: "Client API calls, by server (grpc, http), method (the gRPC method or the sidecar's path) and code (the gRPC code or the HTTP status)."},
			[]string{"server", "method", "code"}),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "api_watchers",
			Help: "Open leadership watches: WatchLeader streams (grpc) and /watch streams (http)."}, []string{"server"}),
	}
}

func (a *API) Describe(ch chan<- *prometheus.Desc) {
	a.calls.Describe(ch)
	a.watchers.Describe(ch)
}

func (a *API) Collect(ch chan<- prometheus.Metric) {
	a.calls.Collect(ch)
	a.watchers.Collect(ch)
}

// grpcMethod is the last element of /pkg.Service/Method.
func grpcMethod(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

// GRPCOptions count every call by method and code, and open WatchLeader
// streams as watchers. Given after the API's own options, they run inside its
// authorization: a call it refuses is counted in api_denied_total only.
func (a *API) GRPCOptions() []grpc.ServerOption {
	watch := a.watchers.WithLabelValues("grpc")
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			a.calls.WithLabelValues("grpc", grpcMethod(info.FullMethod), status.Code(err).String()).Inc()
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			// Only leadership watches count against max-watchers (not,
			// say, a gRPC health Watch).
			leader := info.FullMethod == electordv1.Elector_WatchLeader_FullMethodName
			if leader {
				watch.Inc()
			}
			err := h(srv, ss)
			if leader {
				watch.Dec()
			}
			a.calls.WithLabelValues("grpc", grpcMethod(info.FullMethod), status.Code(err).String()).Inc()
			return err
		}),
	}
}

// httpPaths are the sidecar's paths; any other is counted as "other".
var httpPaths = map[string]bool{"/leader": true, "/leader/self": true, "/watch": true, "/": true, "/healthz": true}

// Handler counts the sidecar's requests by path and status, and open
// /watch streams as watchers.
func (a *API) Handler(h http.Handler) http.Handler {
	watch := a.watchers.WithLabelValues("http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if !httpPaths[path] {
			path = "other"
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		if path == "/watch" {
			watch.Inc()
			defer watch.Dec()
		}
		h.ServeHTTP(sw, r)
		a.httpCounter(path, sw.code).Inc()
	})
}

type httpKey struct {
	path string
	code int
}

func (a *API) httpCounter(path string, code int) prometheus.Counter {
	k := httpKey{path, code}
	if c, ok := a.httpCalls.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c := a.calls.WithLabelValues("http", path, strconv.Itoa(code))
	a.httpCalls.Store(k, c)
	return c
}

// statusWriter notes the status a handler wrote; it keeps Flush (SSE) and
// Unwrap (http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countedListener counts the connections it accepted and those still open.
type countedListener struct {
	net.Listener
	name     string
	open     atomic.Int64
	accepted atomic.Uint64
}

// Listener counts l's connections under the listener label name.
func (a *API) Listener(name string, l net.Listener) net.Listener {
	cl := &countedListener{Listener: l, name: name}
	a.mu.Lock()
	a.lis = append(a.lis, cl)
	a.mu.Unlock()
	return cl
}

func (a *API) listeners() []*countedListener {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*countedListener(nil), a.lis...)
}

func (l *countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countedListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
