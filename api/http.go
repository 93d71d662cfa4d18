package api

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// HTTP server limits (NewHTTPServer).
const (
	httpReadHeaderTimeout = 5 * time.Second  // slowloris guard
	httpReadTimeout       = 10 * time.Second // requests have no body worth waiting for
	httpWriteTimeout      = 10 * time.Second // per response; /watch renews it before every write
	httpIdleTimeout       = 60 * time.Second // keep-alive connections between requests
	// SSEKeepAlive is how often /watch sends a comment line when nothing
	// happened, so proxies and clients see the stream is alive.
	SSEKeepAlive = 15 * time.Second
)

// Every body writes a term two ways: "term", the integer fencing token
// (for programs: compare it, store it), and "term_epoch_slot", the same
// term as people read it ("21.5": the election epoch and the leader's slot,
// as electctl and the logs print it).

// LeaderBody is the JSON of /leader when a leader is known (HTTP 200).
type LeaderBody struct {
	node.LeaderInfo
	TermEpochSlot string `json:"term_epoch_slot"`
}

// NoLeaderBody is the JSON of /leader when no leader is known (HTTP 503).
type NoLeaderBody struct {
	State         string        `json:"state"` // always "no_leader"
	Term          election.Term `json:"term"`  // the last term this node knows
	TermEpochSlot string        `json:"term_epoch_slot"`
}

// SelfBody is the JSON of /leader/self.
type SelfBody struct {
	Self          bool          `json:"self"`  // this node leads
	State         string        `json:"state"` // this node's state
	Term          election.Term `json:"term"`
	TermEpochSlot string        `json:"term_epoch_slot"`
}

type httpHandler struct {
	b         Backend
	keepAlive time.Duration
	// done is closed when the server shuts down; /watch streams end then
	// (http.Server.Shutdown does not cancel request contexts).
	done <-chan struct{}
	// The last /leader and /leader/self answers, encoded: the probes and
	// pollers of one pod ask far more often than leadership changes, so
	// each answer is encoded once per change, not per request.
	leaderCache, selfCache atomic.Pointer[encodedAnswer]
}

// encodedAnswer is an answer encoded for the LeaderInfo it was made from.
type encodedAnswer struct {
	li   node.LeaderInfo
	code int
	body []byte // JSON and a newline
}

// cached returns the answer for li from c, encoding it with enc (a status
// code and a value to encode as JSON) when li changed.
func cached(c *atomic.Pointer[encodedAnswer], li node.LeaderInfo, enc func(node.LeaderInfo) (int, any)) (*encodedAnswer, error) {
	if e := c.Load(); e != nil && e.li == li {
		return e, nil
	}
	code, v := enc(li)
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	e := &encodedAnswer{li: li, code: code, body: append(body, '\n')}
	c.Store(e)
	return e, nil
}

// Shared header values (net/http only reads them).
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

func writeEncoded(w http.ResponseWriter, e *encodedAnswer, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h["Content-Type"], h["Cache-Control"] = headerJSON, headerNoStore
	w.WriteHeader(e.code)
	_, _ = w.Write(e.body)
}

// NewHTTPHandler returns the sidecar HTTP API of the node b:
//
//	GET /leader       200 + the leader JSON {"id","name","address","term","since","self","state","term_epoch_slot"},
//	                  or 503 + {"state":"no_leader","term":N,"term_epoch_slot":"E.S"} when no leader is known
//	GET /leader/self  200 when this node leads, 503 otherwise (leader-only readiness probe);
//	                  body {"self","state","term","term_epoch_slot"}
//	GET /watch        Server-Sent Events: "event: leader" with the /leader JSON as data,
//	                  the current state at once and then every change (in quorum mode the
//	                  lease's start and lapse too: never "self" when /leader/self is 503);
//	                  a comment every 15 s
//	GET /             {"name": "<leader name>"} (the Kubernetes leader-elector sidecar's answer)
//	GET /healthz      200 "ok", or 503 and the reason the node takes no part in elections
//
// HEAD is accepted wherever GET is. Another method is 405 with an Allow
// header; an unknown path is 404 with a JSON error.
func NewHTTPHandler(b Backend) http.Handler {
	return &httpHandler{b: b, keepAlive: SSEKeepAlive}
}

// NewHTTPServer returns an *http.Server for NewHTTPHandler(b), with read,
// write and idle timeouts set and request headers bounded by
// maxHeaderBytes (the max-header-list-bytes key, which bounds the gRPC
// API's headers too); run it with Serve(listener) (or set Addr).
// Its /watch streams end when the server shuts down (Shutdown would wait
// for them otherwise).
func NewHTTPServer(b Backend, maxHeaderBytes int) *http.Server {
	done := make(chan struct{})
	srv := &http.Server{
		Handler:           &httpHandler{b: b, keepAlive: SSEKeepAlive, done: done},
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	srv.RegisterOnShutdown(func() { close(done) })
	return srv
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var serve func(http.ResponseWriter, *http.Request)
	switch r.URL.Path {
	case "/leader":
		serve = h.leader
	case "/leader/self":
		serve = h.leaderSelf
	case "/watch":
		serve = h.watch
	case "/":
		serve = h.root
	case "/healthz":
		serve = h.healthz
	default:
		if h.serveElections(w, r) {
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: " + r.URL.Path})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method " + r.Method + " not allowed"})
		return
	}
	serve(w, r)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// leaderJSON is the /leader answer for li: its status code and body.
func leaderJSON(li node.LeaderInfo) (int, any) {
	if !li.HasLeader() {
		return http.StatusServiceUnavailable, NoLeaderBody{State: node.StateNoLeader, Term: li.Term, TermEpochSlot: li.Term.String()}
	}
	return http.StatusOK, LeaderBody{li, li.Term.String()}
}

func (h *httpHandler) leader(w http.ResponseWriter, _ *http.Request) {
	li := decided(w, h.b.Leader)
	e, err := cached(&h.leaderCache, li, leaderJSON)
	writeEncoded(w, e, err)
}

func (h *httpHandler) leaderSelf(w http.ResponseWriter, _ *http.Request) {
	li := decided(w, h.b.Leader)
	e, err := cached(&h.selfCache, li, selfJSON)
	writeEncoded(w, e, err)
}

// selfJSON is the /leader/self answer for li.
func selfJSON(li node.LeaderInfo) (int, any) {
	code := http.StatusServiceUnavailable
	if li.Self {
		code = http.StatusOK
	}
	return code, SelfBody{Self: li.Self, State: li.State, Term: li.Term, TermEpochSlot: li.Term.String()}
}

func (h *httpHandler) root(w http.ResponseWriter, _ *http.Request) {
	li := h.b.Leader()
	writeJSON(w, http.StatusOK, map[string]string{"name": li.Name})
}

func (h *httpHandler) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if fault := h.b.Status().Fault; fault != "" {
		// The node takes no part in elections (a term it cannot persist).
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(fault + "\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// watch streams leadership as Server-Sent Events until the client goes
// away, the server shuts down or the subscription ends.
func (h *httpHandler) watch(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	sub, err := h.b.Subscribe()
	if err != nil {
		hdr.Del("Content-Type")
		hdr.Del("Cache-Control")
		hdr.Del("X-Accel-Buffering")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	defer sub.Close()

	write := sseWriter(w, rc)
	var (
		last node.LeaderInfo
		sent bool
	)
	encode := func(li node.LeaderInfo) (string, any) {
		if sent && sameLeaderInfo(li, last) {
			return "", nil
		}
		last, sent = li, true
		_, body := leaderJSON(li)
		return "leader", body
	}
	w.WriteHeader(http.StatusOK)
	if name, body := encode(h.b.Leader()); writeEvent(write, name, body) != nil {
		return
	}
	sseLoop(h, r, write, sub.C(), encode)
}

var neverDone = make(chan struct{})
