package history

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// The list poller records, for every election it has a Recorder of, the
// answers of that election's /leader and /leader/self: read from every
// page of the node's list, 503 for an election the list leaves out, the
// request's error for every election when a page fails. Agreement is then
// judged on them as on the paths' answers.
func TestListPollerRecordsEachElectionsAnswers(t *testing.T) {
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/elections" || q.Get("prefix") != "s-" || q.Get("limit") != "1000" {
			t.Errorf("asked for %s", r.URL)
		}
		switch {
		case fail.Load():
			http.Error(w, "down", http.StatusInternalServerError)
		case q.Get("after") == "":
			fmt.Fprint(w, `{"elections":[{"election":"s-a","leader":{"id":2,"term":131074,"self":true,"state":"leader"}}],"next":"s-a"}`)
		case q.Get("after") == "s-a":
			fmt.Fprint(w, `{"elections":[{"election":"s-c","leader":{"id":1,"term":65537,"self":false,"state":"follower"}}]}`)
		default:
			t.Errorf("asked for a page after %q", q.Get("after"))
		}
	}))
	defer srv.Close()
	recs := map[string]*Recorder{"s-a": NewRecorder(), "s-b": NewRecorder(), "s-c": NewRecorder()}
	p := &ListPoller{Client: srv.Client(), URLs: map[int]string{2: srv.URL}, Recs: recs, Prefix: "s-"}
	p.round(context.Background(), 2, srv.URL, time.Second)

	want := map[string][2]Obs{
		"s-a": {{Code: 200, ID: 2, Term: 131074, Self: true, State: "leader"}, {Code: 200, Term: 131074, Self: true, State: "leader"}},
		"s-b": {{Code: 503}, {Code: 503}},
		"s-c": {{Code: 200, ID: 1, Term: 65537, State: "follower"}, {Code: 503, Term: 65537, State: "follower"}},
	}
	for name, w := range want {
		for i, k := range []Kind{Leader, Self} {
			o, ok := recs[name].Latest(2, k)
			if !ok || o.Err != "" || o.Sent.IsZero() || o.Recv.Before(o.Sent) {
				t.Fatalf("%s %v: %+v, %v", name, k, o, ok)
			}
			got := Obs{Code: o.Code, ID: o.ID, Term: o.Term, Self: o.Self, State: o.State}
			if got != w[i] {
				t.Errorf("%s %v: %+v, want %+v", name, k, got, w[i])
			}
		}
	}
	// Node 2 leads s-a as its own list says: one up node agrees.
	if a, ok := recs["s-a"].WaitAgreed([]int{2}, time.Time{}, 0); !ok || a.Leader != 2 {
		t.Errorf("s-a not agreed on node 2: %+v, %v", a, ok)
	}
	if _, ok := recs["s-c"].WaitAgreed([]int{2}, time.Time{}, 0); ok {
		t.Error("s-c agreed on node 1, which is not up")
	}

	fail.Store(true)
	p.round(context.Background(), 2, srv.URL, time.Second)
	for name, rec := range recs {
		if o, _ := rec.Latest(2, Self); o.Err == "" {
			t.Errorf("%s after a failed page: %+v, want the error", name, o)
		}
	}
}
