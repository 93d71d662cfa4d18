// Command exampleapp is the application container of the Docker-simulated
// pods (rolling_test.go): the smallest app that uses electord as a sidecar.
// It polls the sidecar's GET /leader/self in its own pod (200: this pod
// leads; 503: it does not) and serves its own HTTP:
//
//	GET /      {"pod": "<hostname>", "role": "leader"|"follower"|"unknown", "term": "...", "polls": n}
//	GET /healthz 200
//
// Settings from the environment, as a Kubernetes manifest sets them:
// LEADER_URL (default http://127.0.0.1:4040/leader/self), POLL (a Go
// duration, default 100ms), LISTEN (default :8080). It exits on SIGTERM.
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
	mu    sync.Mutex
	Pod   string `json:"pod"`
	Role  string `json:"role"`
	Term  any    `json:"term,omitempty"`
	Polls int    `json:"polls"`
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
	st := &state{Pod: host, Role: "unknown"}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		client := &http.Client{Timeout: time.Second}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			role, term := ask(client, leaderURL)
			st.mu.Lock()
			if role != st.Role {
				log.Printf("exampleapp: %s is now %s (term %v)", host, role, term)
			}
			st.Role, st.Term = role, term
			st.Polls++
			st.mu.Unlock()
			select {
			case <-ctx.Done():
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
