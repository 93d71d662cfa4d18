package main

// The named overlay's mode: the app campaigns in a named election through
// the sidecar in its own pod, POST /elections/{name}/campaign
// (CAMPAIGN_URL), with its VALUE (shown to the others as the leader's
// value; default <hostname>:8080), and reads the Server-Sent Events that
// say whether it leads (event leader) or another app does (follower), or
// that no leader is known yet (candidate). Its candidacy lasts exactly as
// long as that stream: if the app dies, the kernel closes the socket and
// the node hands the leadership over at once. When the stream ends
// (the sidecar not up yet, stopped, or refused) it campaigns again after
// RETRY (default 100ms).
//
// Handing over is closing the stream: the node transfers the leadership
// to another pod's app (one message) and the leader Service, which follows
// the election (--k8s-leader-election), moves to that pod. No API client,
// no certificate: closing a stream needs no permission.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log"
	"net/http"
	"strings"
	"time"
)

// startCampaign campaigns until the returned hand-over is called (or the
// process exits); the hand-over returns once the stream is closed.
func startCampaign(url, value string, retry time.Duration, st *state) (handOver func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			campaign(ctx, url, value, st)
			st.set("unknown", nil, false)
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
		}
	}()
	return func() {
		cancel()
		<-done
		log.Printf("exampleapp: %s closed its campaign before draining", st.Pod)
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
