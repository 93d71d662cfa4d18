// Command exampleapp is the application container of the Docker-simulated
// pods (rolling_test.go): the smallest app that uses electord as a sidecar.
// It polls the sidecar's GET /leader/self in its own pod (200: this pod
// leads; 503: it does not) and serves its own HTTP:
//
//	GET /      {"pod": "<hostname>", "role": "leader"|"follower"|"unknown", "term": "...", "polls": n, "draining": bool}
//	GET /healthz 200
//
// Settings from the environment, as a Kubernetes manifest sets them:
// LEADER_URL (default http://127.0.0.1:4040/leader/self), POLL (a Go
// duration, default 100ms), LISTEN (default :8080), DRAIN (how long it
// keeps draining after SIGTERM, a Go duration, default 0), RESIGN_API
// (default 127.0.0.1:7070; "off" to not hand over).
//
// Stopping. A native sidecar stops after the app: when the leader's pod is
// deleted, the kubelet sends SIGTERM to this app first and to electord only
// once the app has exited, so for the whole drain electord still leads and
// the leader Service still routes here, while nobody else leads. So on
// SIGTERM, if this pod leads, the app first asks its electord to hand over
// (Resign on the client API, through the Go client library), waits (at most
// 3 s) until its sidecar no longer names it, and only then drains. Another
// pod leads while this one drains. With the secure overlay the API asks for
// a client certificate with the admin role (electord certs client --admin,
// mounted into the app; client.WithTLSFiles).
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

	"github.com/electord/electord/client"
)

type state struct {
	mu       sync.Mutex
	Pod      string `json:"pod"`
	Role     string `json:"role"`
	Term     any    `json:"term,omitempty"`
	Polls    int    `json:"polls"`
	Draining bool   `json:"draining"`
	leads    bool   // what the last leads= line said
	changed  chan struct{}
}

// update records a poll and logs a change of whether this app leads
// (a leader that drains does not). Called with mu held.
func (st *state) update() {
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

func main() {
	poll, err := time.ParseDuration(env("POLL", "100ms"))
	if err != nil || poll <= 0 {
		log.Fatalf("exampleapp: POLL=%q: want a positive Go duration such as 100ms", os.Getenv("POLL"))
	}
	leaderURL := env("LEADER_URL", "http://127.0.0.1:4040/leader/self")
	host, _ := os.Hostname()
	drain, err := time.ParseDuration(env("DRAIN", "0s"))
	if err != nil || drain < 0 {
		log.Fatalf("exampleapp: DRAIN=%q: want a Go duration such as 2s", os.Getenv("DRAIN"))
	}
	resignAPI := env("RESIGN_API", "127.0.0.1:7070")
	st := &state{Pod: host, Role: "unknown", changed: make(chan struct{})}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	done := make(chan struct{}) // the poller stops once the app is out
	defer close(done)
	go func() {
		client := &http.Client{Timeout: time.Second}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			default:
			}
			role, term := ask(client, leaderURL)
			st.mu.Lock()
			st.Role, st.Term = role, term
			st.Polls++
			st.update()
			st.mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()

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
		<-ctx.Done()
		if resignAPI != "off" {
			handOver(st, resignAPI)
		}
		st.mu.Lock()
		st.Draining = true
		st.update()
		st.mu.Unlock()
		time.Sleep(drain) // a real app finishes its requests and its leader-only work here
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("exampleapp: %v", err)
	}
}

// ask is one poll of the sidecar: its answer, or unknown if it does not
// answer (not started yet, or stopped).
func ask(c *http.Client, url string) (role string, term any) {
	resp, err := c.Get(url)
	if err != nil {
		return "unknown", nil
	}
	defer resp.Body.Close()
	var body struct {
		Self bool `json:"self"`
		Term any  `json:"term"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	switch {
	case resp.StatusCode == http.StatusOK && body.Self:
		return "leader", body.Term
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusServiceUnavailable:
		return "follower", body.Term
	}
	return "unknown", nil
}

// handOver: if this pod leads, ask electord (its client API in this pod)
// to resign, and wait until the sidecar no longer names this pod, at most
// 3 s; the app drains after it either way.
func handOver(st *state, api string) {
	st.mu.Lock()
	leads := st.leads
	st.mu.Unlock()
	if !leads {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := client.NewWithOptions([]string{api}, client.WithDialTimeout(time.Second))
	if err != nil {
		log.Printf("exampleapp: hand over: %v", err)
		return
	}
	defer c.Close()
	if _, err := c.Resign(ctx); err != nil {
		log.Printf("exampleapp: hand over: resign: %v (draining as the leader)", err)
		return
	}
	for {
		st.mu.Lock()
		leads, changed := st.Role == "leader", st.changed
		st.mu.Unlock()
		if !leads {
			log.Printf("exampleapp: %s handed over before draining", st.Pod)
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			log.Printf("exampleapp: hand over: still named the leader after 3s; draining anyway")
			return
		}
	}
}
