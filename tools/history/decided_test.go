package history

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/api"
)

// The poller keeps a node's decision window when it lies within the
// request's round trip (the node shares the poller's clock), and drops
// it otherwise (another host's clock, or a lie).
func TestPollerKeepsTheNodesDecisionWindow(t *testing.T) {
	var shift atomic.Int64 // ns added to the node's clock
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now().UnixNano() + shift.Load()
		w.Header().Set(api.DecidedHeader, fmt.Sprintf("%d-%d", now, now+1000))
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, `{"self":true,"state":"leader","term":65537}`)
	}))
	defer srv.Close()
	p := &Poller{Client: srv.Client()}
	o := p.ask(context.Background(), 1, srv.URL, Self, time.Second)
	if !o.Claim() || o.DecidedFrom.IsZero() || o.DecidedFrom.Before(o.Sent) || o.DecidedTo.After(o.Recv) {
		t.Fatalf("same clock: %+v, want a claim with its decision window inside [Sent, Recv]", o)
	}
	if from, to := o.Window(); !from.Equal(o.DecidedFrom) || !to.Equal(o.DecidedTo) {
		t.Fatalf("Window = [%v, %v], want the decision window", from, to)
	}
	shift.Store(int64(time.Hour))
	o = p.ask(context.Background(), 1, srv.URL, Self, time.Second)
	if !o.Claim() || !o.DecidedFrom.IsZero() {
		t.Fatalf("another clock: %+v, want a claim without a decision window", o)
	}
	if from, to := o.Window(); !from.Equal(o.Sent) || !to.Equal(o.Recv) {
		t.Fatalf("Window = [%v, %v], want [Sent, Recv]", from, to)
	}
}
