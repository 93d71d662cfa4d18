package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/node"
)

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	return do(t, http.MethodGet, url)
}

func do(t *testing.T, method, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func keys(t *testing.T, body string) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestHTTPLeader(t *testing.T) {
	c := apitest.NewCluster(3)
	c.SetAPIAddr(3, "10.0.0.3:7070")
	srv := httptest.NewServer(api.NewHTTPHandler(c.Node(1)))
	defer srv.Close()

	code, hdr, body := get(t, srv.URL+"/leader")
	if code != http.StatusServiceUnavailable || body != `{"state":"no_leader","term":0,"term_epoch_slot":"0.0"}`+"\n" || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("no leader: %d %q %v", code, body, hdr)
	}

	c.Elect(3)
	code, _, body = get(t, srv.URL+"/leader")
	if code != http.StatusOK {
		t.Fatalf("leader: %d %s", code, body)
	}
	if got, want := keys(t, body), []string{"address", "id", "name", "self", "since", "state", "term", "term_epoch_slot"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fields %v; want %v", got, want)
	}
	var li node.LeaderInfo
	if err := json.Unmarshal([]byte(body), &li); err != nil {
		t.Fatal(err)
	}
	want := c.Node(1).Leader()
	if li.ID != 3 || li.Name != "node-3" || li.Address != "10.0.0.3:7070" || li.Term != want.Term || !li.Since.Equal(want.Since) || li.Self || li.State != "follower" {
		t.Fatalf("/leader = %+v", li)
	}
	if !strings.Contains(body, `"term":65539`) { // a number on the wire, not "1.3"
		t.Fatalf("term not a number: %s", body)
	}
	// ...and, labelled, as people read it (issue 14: only 65539).
	if !strings.Contains(body, `"term_epoch_slot":"1.3"`) {
		t.Fatalf("no term_epoch_slot: %s", body)
	}

	code, _, body = get(t, srv.URL+"/")
	if code != http.StatusOK || body != `{"name":"node-3"}`+"\n" {
		t.Fatalf("/ = %d %q", code, body)
	}
	code, _, body = get(t, srv.URL+"/healthz")
	if code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
}

func TestHTTPLeaderSelf(t *testing.T) {
	c := apitest.NewCluster(2)
	c.Elect(2)
	s1 := httptest.NewServer(api.NewHTTPHandler(c.Node(1)))
	defer s1.Close()
	s2 := httptest.NewServer(api.NewHTTPHandler(c.Node(2)))
	defer s2.Close()
	if code, _, body := get(t, s2.URL+"/leader/self"); code != 200 || body != `{"self":true,"state":"leader","term":65538,"term_epoch_slot":"1.2"}`+"\n" {
		t.Fatalf("leader: %d %q", code, body)
	}
	if code, _, body := get(t, s1.URL+"/leader/self"); code != 503 || body != `{"self":false,"state":"follower","term":65538,"term_epoch_slot":"1.2"}`+"\n" {
		t.Fatalf("follower: %d %q", code, body)
	}
	if code, _, _ := do(t, http.MethodHead, s2.URL+"/leader/self"); code != 200 {
		t.Fatalf("HEAD: %d", code)
	}
}

func TestHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(api.NewHTTPHandler(apitest.NewCluster(1).Node(1)))
	defer srv.Close()
	for _, path := range []string{"/leader", "/leader/self", "/watch", "/", "/healthz"} {
		code, hdr, body := do(t, http.MethodPost, srv.URL+path)
		if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD" || !strings.Contains(body, `"error"`) {
			t.Errorf("POST %s: %d Allow=%q %q", path, code, hdr.Get("Allow"), body)
		}
	}
	for _, path := range []string{"/nope", "/leader/", "/leader/other", "/watch/x"} {
		code, hdr, body := get(t, srv.URL+path)
		if code != http.StatusNotFound || hdr.Get("Content-Type") != "application/json" || keys(t, body)[0] != "error" {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}
}

// sse reads Server-Sent Events: each item is one event block or comment.
func sse(t *testing.T, body io.Reader) <-chan string {
	out := make(chan string, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		var block []string
		for sc.Scan() {
			if sc.Text() == "" {
				out <- strings.Join(block, "\n")
				block = nil
				continue
			}
			block = append(block, sc.Text())
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return ""
}

func TestHTTPWatch(t *testing.T) {
	c := apitest.NewCluster(2)
	c.Elect(2)
	n1 := c.Node(1)
	srv := httptest.NewServer(api.NewHTTPHandlerKeepAlive(n1, 50*time.Millisecond))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/watch", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	ev := sse(t, resp.Body)
	_, _, leaderBody := get(t, srv.URL+"/leader")
	if got, want := next(t, ev), "event: leader\ndata: "+strings.TrimSpace(leaderBody); got != want {
		t.Fatalf("initial event %q; want %q", got, want)
	}
	// Keep-alive comments arrive while nothing changes.
	if got := next(t, ev); got != ": keep-alive" {
		t.Fatalf("got %q; want a keep-alive comment", got)
	}
	c.NoLeader()
	for {
		got := next(t, ev)
		if strings.HasPrefix(got, ":") {
			continue
		}
		if got != `event: leader`+"\n"+`data: {"state":"no_leader","term":65538,"term_epoch_slot":"1.2"}` {
			t.Fatalf("no-leader event %q", got)
		}
		break
	}
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := n1.WaitSubscribers(wctx, 0); err != nil { // the handler ends when the client goes away
		t.Fatal(err)
	}
}

func TestHTTPServerShutdownEndsWatch(t *testing.T) {
	c := apitest.NewCluster(1)
	srv := api.NewHTTPServer(c.Node(1), apitest.Limits().MaxHeaderListBytes)
	if srv.MaxHeaderBytes != apitest.Limits().MaxHeaderListBytes {
		t.Fatalf("MaxHeaderBytes %d, want the configured %d", srv.MaxHeaderBytes, apitest.Limits().MaxHeaderListBytes)
	}
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 {
		t.Fatalf("timeouts not set: %+v", srv)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	resp, err := http.Get("http://" + lis.Addr().String() + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ev := sse(t, resp.Body)
	next(t, ev)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with an open /watch: %v", err)
	}
	for range ev {
	}
}
