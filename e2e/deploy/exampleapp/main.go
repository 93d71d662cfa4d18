// Command exampleapp is the application container of the example manifests
// (deploy/k8s) and of the Docker-simulated pods (rolling_test.go): the
// smallest app that uses electord as a sidecar. It campaigns in a named
// election through the sidecar in its own pod, POST
// /elections/{name}/campaign, and reads the Server-Sent Events that say
// whether it leads (event leader) or another app does (follower), or that
// no leader is known yet (candidate). Its candidacy lasts exactly as long
// as that stream: if the app dies, the kernel closes the socket and the
// node hands the leadership over at once. It serves its own HTTP:
//
//	GET /      {"pod": "<hostname>", "role": "leader"|"follower"|"unknown", "term": ..., "events": n, "draining": bool}
//	GET /healthz 200
//
// Settings from the environment, as a Kubernetes manifest sets them:
// CAMPAIGN_URL (default http://127.0.0.1:4040/elections/my-app/campaign),
// VALUE (what the app stands with, shown to the others as the leader's
// value; default <hostname>:8080), RETRY (how soon it campaigns again when
// the stream ends or the sidecar does not answer, a Go duration, default
// 100ms; POLL, its old name, is read too), LISTEN (default :8080), DRAIN
// (how long it keeps draining after SIGTERM, a Go duration, default 0),
// HANDOVER (default on; off keeps campaigning through the drain).
//
// Stopping. A native sidecar stops after the app: when the leader's pod is
// deleted, the kubelet sends SIGTERM to this app first and to electord only
// once the app has exited. On SIGTERM the app closes its campaign stream
// before it drains: its node hands the leadership to another pod's app
// (a transfer, one message) and the leader Service, which follows the
// election (--k8s-leader-election), moves to that pod. No API client, no
// certificate: closing a stream needs no permission. With HANDOVER=off the
// app leads through its whole drain, and nobody else does.
//
// Each change of whether it leads is logged as one line, "exampleapp:
// <pod> leads=<true|false> at=<RFC 3339 time>", which the rolling-update
// test reads to measure the time no app leads. Draining counts as not
// leading.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

type state struct {
	mu       sync.Mutex
	Pod      string `json:"pod"`
	Role     string `json:"role"`
	Term     any    `json:"term,omitempty"`
	Events   int    `json:"events"`
	Draining bool   `json:"draining"`
	leads    bool   // what the last leads= line said
}

// set records the campaign's state and logs a change of whether this app
// leads (a leader that drains does not).
func (st *state) set(role string, term any, event bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.Role, st.Term = role, term
	if event {
		st.Events++
	}
	st.logChange()
}

// logChange logs a change of whether this app leads. Called with mu held.
func (st *state) logChange() {
	leads := st.Role == "leader" && !st.Draining
	if leads != st.leads {
		st.leads = leads
		log.Printf("exampleapp: %s leads=%v at=%s (role %s, term %v, draining %v)", st.Pod, leads, time.Now().UTC().Format(time.RFC3339Nano), st.Role, st.Term, st.Draining)
	}
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	retry, err := time.ParseDuration(env("RETRY", env("POLL", "100ms")))
	if err != nil || retry <= 0 {
		log.Fatalf("exampleapp: RETRY=%q: want a positive Go duration such as 100ms", os.Getenv("RETRY"))
	}
	campaignURL := env("CAMPAIGN_URL", "http://127.0.0.1:4040/elections/my-app/campaign")
	host, _ := os.Hostname()
	value := env("VALUE", host+":8080")
	drain, err := time.ParseDuration(env("DRAIN", "0s"))
	if err != nil || drain < 0 {
		log.Fatalf("exampleapp: DRAIN=%q: want a Go duration such as 2s", os.Getenv("DRAIN"))
	}
	handover := env("HANDOVER", "on")
	if handover != "on" && handover != "off" {
		log.Fatalf("exampleapp: HANDOVER=%q: want on or off", handover)
	}
	st := &state{Pod: host, Role: "unknown"}

	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The campaign lasts until SIGTERM (HANDOVER=on) or until the process
	// exits (off): its context ends the stream.
	campaignCtx, endCampaign := context.WithCancel(context.Background())
	defer endCampaign()
	if handover == "on" {
		campaignCtx = sig
	}
	campaigned := make(chan struct{})
	go func() {
		defer close(campaigned)
		for campaignCtx.Err() == nil {
			campaign(campaignCtx, campaignURL, value, st)
			st.set("unknown", nil, false)
			select {
			case <-campaignCtx.Done():
			case <-time.After(retry):
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
		<-sig.Done()
		if handover == "on" {
			<-campaigned // the stream is closed: the node hands over
			log.Printf("exampleapp: %s closed its campaign before draining", st.Pod)
		}
		st.mu.Lock()
		st.Draining = true
		st.logChange()
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

// campaign stands in the election until the stream ends (ctx ended, the
// sidecar stopped or refused), recording each event.
func campaign(ctx context.Context, url, value string, st *state) {
	body, _ := json.Marshal(map[string]string{"value": value})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		log.Fatalf("exampleapp: CAMPAIGN_URL=%q: %v", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req) // no timeout: the stream lasts as long as the candidacy
	if err != nil {
		return // the sidecar is not up yet, or stopped
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	sc := bufio.NewScanner(resp.Body)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data struct {
				Term any `json:"term"`
			}
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data)
			role := "follower" // follower, or candidate: standing, not leading
			if event == "leader" {
				role = "leader"
			}
			st.set(role, data.Term, true)
		}
	}
}
