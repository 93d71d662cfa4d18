package handshake

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// logLines are the JSON lines logged to b (one goroutine logs in these
// tests).
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

var remote = &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40000}

// Within LogEvery a listener logs one line per reason; the next line after
// it says how many were not logged; every refusal is counted; another
// listener or reason has its own budget.
func TestLogIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	r := New(slog.New(slog.NewJSONHandler(&buf, nil)))
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	peer, api := r.Listener(Peer), r.Listener(API)
	notTLS := tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}
	for range 5 {
		peer.Refused(remote, notTLS)
		now = now.Add(time.Second)
	}
	peer.Refused(remote, errTimeout{})
	api.Refused(remote, notTLS)
	if n := len(logLines(t, &buf)); n != 3 {
		t.Fatalf("%d lines after 5 peer not_tls, 1 peer timeout, 1 api not_tls within LogEvery, want 3:\n%s", n, buf.String())
	}
	now = now.Add(LogEvery)
	peer.Refused(remote, notTLS)
	lines := logLines(t, &buf)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4", len(lines))
	}
	last := lines[3]
	if last["listener"] != "peer" || last["reason"] != "not_tls" || last["suppressed"] != float64(4) || last["remote"] != remote.String() {
		t.Errorf("the line after LogEvery: %v, want peer, not_tls, suppressed 4, remote %s", last, remote)
	}
	if got := peer.Count(NotTLS); got != 6 {
		t.Errorf("peer not_tls counted %d, want 6", got)
	}
	counts := map[[2]string]uint64{}
	for _, c := range r.Counts() {
		counts[[2]string{c.Listener, c.Reason.String()}] = c.N
	}
	if r.Listener(Peer) != peer {
		t.Error("a second recorder of one listener")
	}
	if len(counts) != 2*int(numReasons) || counts[[2]string{"api", "not_tls"}] != 1 || counts[[2]string{"peer", "timeout"}] != 1 {
		t.Errorf("Counts: %v", counts)
	}
}

// A connection the server closed itself (it is stopping) is no refusal;
// a nil recorder records nothing.
func TestNotRefusals(t *testing.T) {
	var buf bytes.Buffer
	r := New(slog.New(slog.NewJSONHandler(&buf, nil)))
	rec := r.Listener(HTTP)
	rec.Refused(remote, net.ErrClosed)
	rec.Refused(remote, nil)
	var none *Recorder
	none.Refused(remote, errTimeout{})
	for _, c := range r.Counts() {
		if c.N != 0 {
			t.Errorf("%+v counted", c)
		}
	}
	if buf.Len() != 0 {
		t.Errorf("logged: %s", buf.String())
	}
}

type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

// Errors of no type of their own are Other, whatever they wrap that is not
// a known type.
func TestClassifyOther(t *testing.T) {
	for _, err := range []error{nil, errors.New("something new"), errors.New("tls: unsupported signing key type")} {
		if got := Classify(err); got != Other {
			t.Errorf("Classify(%v) = %s, want other", err, got)
		}
	}
	if got := Classify(errTimeout{}); got != Timeout {
		t.Errorf("a net.Error timeout: %s", got)
	}
	if Reason(200).String() != "other" {
		t.Error("an unknown reason is not reported as other")
	}
}
