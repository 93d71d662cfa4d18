package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func newProber(t *testing.T, url string, period, timeout time.Duration, failures int) *CandidateProber {
	t.Helper()
	p, err := NewCandidateProber(CandidateProberConfig{URL: url, Period: period, Timeout: timeout, Failures: failures, Successes: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A probe passes on 2xx and 3xx (a redirect is not followed), and fails on
// other codes, a timeout and a refused connection, which it tells apart.
func TestCandidateProbeCheck(t *testing.T) {
	var code atomic.Int32
	var delay atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(delay.Load())) // the app's slowness, the case under test
		if c := int(code.Load()); c >= 300 && c < 400 {
			http.Redirect(w, r, "/elsewhere-that-does-not-exist", c)
			return
		}
		w.WriteHeader(int(code.Load()))
	}))
	defer srv.Close()
	p := newProber(t, srv.URL+"/healthz", time.Second, 100*time.Millisecond, 1)
	ctx := context.Background()
	for _, tc := range []struct {
		code int
		pass bool
	}{{200, true}, {204, true}, {302, true}, {307, true}, {404, false}, {500, false}, {503, false}} {
		code.Store(int32(tc.code))
		refused, err := p.Check(ctx)
		if (err == nil) != tc.pass || refused {
			t.Errorf("status %d: err %v refused %v, want pass=%v", tc.code, err, refused, tc.pass)
		}
	}
	code.Store(200)
	delay.Store(int64(300 * time.Millisecond))
	if refused, err := p.Check(ctx); err == nil || refused {
		t.Errorf("a probe past its timeout: err %v refused %v, want a failure that is not a refusal", err, refused)
	}
	delay.Store(0)

	// Nothing listens: refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if refused, err := newProber(t, "http://"+addr+"/", time.Second, time.Second, 1).Check(ctx); err == nil || !refused {
		t.Errorf("a closed port: err %v refused %v, want refused", err, refused)
	}
}

// The verdict's thresholds: failures in a row fail it, a refusal at once,
// successes in a row pass it; it starts failing.
func TestCandidateProbeVerdict(t *testing.T) {
	v := probeVerdict{failures: 2, successes: 2, info: CandidateProbeInfo{LastError: "no probe has passed yet"}}
	now := time.Now()
	bad := errors.New("status 500")
	steps := []struct {
		err     error
		refused bool
		ok      bool
		changed bool
	}{
		{nil, false, false, false},      // one pass of two
		{bad, false, false, true},       // the run restarts; the error is news
		{nil, false, false, false},      // one
		{nil, false, true, true},        // two: passes
		{bad, false, true, true},        // one failure of two: still OK, the error shown
		{nil, false, true, true},        // the failure run ends (the error is cleared)
		{bad, false, true, true},        // one
		{bad, false, false, true},       // two: fails
		{nil, false, false, false},      // one pass (the error stays: not passing yet)
		{nil, false, true, true},        // passes
		{errRefused, true, false, true}, // a refusal fails it at once
	}
	for i, s := range steps {
		changed := v.observe(s.err, s.refused, now.Add(time.Duration(i)*time.Second))
		if v.info.OK != s.ok || changed != s.changed {
			t.Fatalf("step %d (%v): ok=%v changed=%v, want ok=%v changed=%v (%+v)", i, s.err, v.info.OK, changed, s.ok, s.changed, v.info)
		}
	}
}

var errRefused = errors.New("connect: connection refused")

// Run reports the first verdict at once, each change after, and returns
// when its context ends; a dead app is reported within a period.
func TestCandidateProbeRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	p := newProber(t, srv.URL, 20*time.Millisecond, 20*time.Millisecond, 3)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan CandidateProbeInfo, 16)
	done := make(chan struct{})
	go func() { p.Run(ctx, func(v CandidateProbeInfo) { got <- v }); close(done) }()
	next := func() CandidateProbeInfo {
		t.Helper()
		select {
		case v := <-got:
			return v
		case <-time.After(5 * time.Second):
			t.Fatal("no verdict within 5s")
		}
		return CandidateProbeInfo{}
	}
	if v := next(); !v.OK {
		t.Fatalf("first verdict: %+v", v)
	}
	killed := time.Now()
	srv.CloseClientConnections()
	srv.Close()
	v := next()
	if v.OK {
		t.Fatalf("after the app died: %+v", v)
	}
	// Refused at once, whatever the failure threshold (3 periods here).
	if d := time.Since(killed); d > 2*time.Second {
		t.Errorf("the dead app was reported after %v", d)
	}
	t.Logf("dead app reported %v after its death: %s", time.Since(killed), v.LastError)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
