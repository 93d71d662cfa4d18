package main

// The default overlays' mode: the app polls the sidecar's GET /leader/self
// in its own pod (LEADER_URL; 200: this pod's node leads the node's own
// election, 503: it does not) every POLL (default 100ms). The leader
// Service follows the same election.
//
// Handing over: if this pod leads, the app asks its electord to resign
// (Resign on the client API in this pod, RESIGN_API, default
// 127.0.0.1:7070, through the Go client library) and waits, at most 3 s,
// until its sidecar no longer names it. With the secure overlay the API
// asks for a client certificate with the admin role (electord certs client
// --admin, mounted into the app; client.WithTLSFiles), which this example
// does not have: run it with HANDOVER=off there.

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"time"

	"github.com/electord/electord/client"
)

// startPolling polls until the process exits.
func startPolling(url string, every time.Duration, resignAPI string, st *state) (handOver func()) {
	go func() {
		c := &http.Client{Timeout: time.Second}
		t := time.NewTicker(every)
		for {
			role, term := ask(c, url)
			st.set(role, term, true)
			<-t.C
		}
	}()
	return func() { resign(st, resignAPI) }
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

// resign: if this pod leads, ask electord to resign, and wait until the
// sidecar no longer names this pod, at most 3 s; the app drains after it
// either way.
func resign(st *state, api string) {
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
