// Command exampleapp is the application container of the example manifests
// (deploy/k8s) and of the Docker-simulated pods (rolling_test.go): the
// smallest app that uses electord as a sidecar. It learns whether it leads
// in one of two ways, chosen by the environment:
//
//   - CAMPAIGN_URL set (the named overlay): it campaigns in a named
//     election through the sidecar in its own pod (campaign.go).
//   - otherwise (the plain and secure overlays): it polls whether its
//     node leads the node's own election, LEADER_URL (poll.go).
//
// It serves its own HTTP:
//
//	GET /      {"pod": "<hostname>", "role": "leader"|"follower"|"unknown", "term": ..., "updates": n, "draining": bool}
//	GET /healthz 200
//
// Settings from the environment, as a Kubernetes manifest sets them, beyond
// each mode's own: LISTEN (default :8080), DRAIN (how long it keeps
// draining after SIGTERM, a Go duration, default 0), HANDOVER (default on;
// off keeps leading through the drain).
//
// Stopping. A native sidecar stops after the app: when the leader's pod is
// deleted, the kubelet sends SIGTERM to this app first and to electord only
// once the app has exited. So on SIGTERM the app first hands over (each
// mode's way), and only then drains: another pod leads while this one
// drains. With HANDOVER=off the app leads through its whole drain, and
// nobody else does.
//
// Each change of whether it leads is logged as one line, "exampleapp:
// <pod> leads=<true|false> at=<RFC 3339 time>", which the rolling-update
// test reads to measure the time no app leads. Draining counts as not
// leading.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

type state struct {
	mu       sync.Mutex
	Pod      string `json:"pod"`
	Role     string `json:"role"`
	Term     any    `json:"term,omitempty"`
	Updates  int    `json:"updates"` // polls answered, or campaign events
	Draining bool   `json:"draining"`
	leads    bool   // what the last leads= line said
	changed  chan struct{}
}

// set records what the sidecar said and logs a change of whether this app
// leads (a leader that drains does not).
func (st *state) set(role string, term any, update bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.Role, st.Term = role, term
	if update {
		st.Updates++
	}
	st.logChange()
}

// drain marks the app draining: it no longer leads, whatever the sidecar says.
func (st *state) drain() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.Draining = true
	st.logChange()
}

// logChange logs a change of whether this app leads and wakes the
// waiters on changed. Called with mu held.
func (st *state) logChange() {
	leads := st.Role == "leader" && !st.Draining
	if leads != st.leads {
		st.leads = leads
		log.Printf("exampleapp: %s leads=%v at=%s (role %s, term %v, draining %v)", st.Pod, leads, time.Now().UTC().Format(time.RFC3339Nano), st.Role, st.Term, st.Draining)
	}
	close(st.changed)
	st.changed = make(chan struct{})
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// duration reads a positive Go duration from the environment.
func duration(key, def string) time.Duration {
	d, err := time.ParseDuration(env(key, def))
	if err != nil || d <= 0 {
		log.Fatalf("exampleapp: %s=%q: want a positive Go duration such as %s", key, os.Getenv(key), def)
	}
	return d
}

func main() {
	host, _ := os.Hostname()
	drain, err := time.ParseDuration(env("DRAIN", "0s"))
	if err != nil || drain < 0 {
		log.Fatalf("exampleapp: DRAIN=%q: want a Go duration such as 2s", os.Getenv("DRAIN"))
	}
	handover := env("HANDOVER", "on")
	if handover != "on" && handover != "off" {
		log.Fatalf("exampleapp: HANDOVER=%q: want on or off", handover)
	}
	st := &state{Pod: host, Role: "unknown", changed: make(chan struct{})}

	// handOver, called on SIGTERM before the drain, returns once another
	// pod's app may lead (or it gave up).
	var handOver func()
	if url := os.Getenv("CAMPAIGN_URL"); url != "" {
		handOver = startCampaign(url, env("VALUE", host+":8080"), duration("RETRY", "100ms"), st)
	} else {
		handOver = startPolling(env("LEADER_URL", "http://127.0.0.1:4040/leader/self"), duration("POLL", "100ms"), env("RESIGN_API", "127.0.0.1:7070"), st)
	}

	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		defer st.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	srv := &http.Server{Addr: env("LISTEN", ":8080"), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-sig.Done()
		if handover == "on" {
			handOver()
		}
		st.drain()
		time.Sleep(drain) // a real app finishes its requests and its leader-only work here
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("exampleapp: %v", err)
	}
}
