package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/client"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

func serve(t *testing.T, c *apitest.Cluster, id election.NodeID) *apitest.Server {
	t.Helper()
	s, err := apitest.Serve(c.Node(id))
	if err != nil {
		t.Fatal(err)
	}
	c.SetAPIAddr(id, s.Addr)
	t.Cleanup(s.Stop)
	return s
}

// closedAddr is a loopback address with nothing listening.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentAddr accepts TCP connections and never speaks: a hung server.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

func newClient(t *testing.T, eps []string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.NewWithOptions(eps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNewErrors(t *testing.T) {
	if _, err := client.New(); err == nil {
		t.Error("no endpoints accepted")
	}
	if _, err := client.New("127.0.0.1:1", " "); err == nil {
		t.Error("empty endpoint accepted")
	}
	if _, err := client.NewWithOptions([]string{"x:1"}, client.WithDialTimeout(0)); err == nil {
		t.Error("zero dial timeout accepted")
	}
	if _, err := client.NewWithOptions([]string{"x:1"}, client.WithBackoff(time.Second, time.Millisecond)); err == nil {
		t.Error("backoff min > max accepted")
	}
}

func TestFailoverFirstEndpointClosed(t *testing.T) {
	cl := apitest.NewCluster(2)
	cl.Elect(2)
	s2 := serve(t, cl, 2)
	dead := closedAddr(t)
	c := newClient(t, []string{dead, s2.Addr})
	ctx := ctxT(t)

	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if li.ID != 2 || !li.Self || li.Name != "node-2" || li.Address != s2.Addr || li.Term != cl.Term() || li.State != node.StateLeader {
		t.Fatalf("Leader = %+v", li)
	}
	if lead, err := c.IsLeader(ctx); err != nil || !lead {
		t.Fatalf("IsLeader = %v, %v; node 2 answers and leads", lead, err)
	}
	ms, err := c.Members(ctx)
	if err != nil || len(ms) != 2 || ms[1].APIAddr != s2.Addr || ms[1].Role != "leader" {
		t.Fatalf("Members = %+v, %v", ms, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Self != 2 || st.Leader.ID != 2 || len(st.Members) != 2 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
}

func TestNoEndpointAnswered(t *testing.T) {
	a, b := closedAddr(t), closedAddr(t)
	c := newClient(t, []string{a, b})
	_, err := c.Leader(ctxT(t))
	var ne *client.NoEndpointError
	if !errors.As(err, &ne) || len(ne.Tried) != 2 {
		t.Fatalf("err = %#v; want *NoEndpointError for 2 endpoints", err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code %v", status.Code(err))
	}
	want := "no endpoint answered (" + a + ": connection refused; " + b + ": connection refused)"
	if err.Error() != want {
		t.Fatalf("error %q\nwant  %q", err, want)
	}
}

// An endpoint that answers with an error is final: the next one is not asked.
func TestAnsweredErrorIsNotFailedOver(t *testing.T) {
	lost := apitest.NewCluster(1) // no leader known
	led := apitest.NewCluster(1)
	led.Elect(1)
	sLost, sLed := serve(t, lost, 1), serve(t, led, 1)
	c := newClient(t, []string{sLost.Addr, sLed.Addr})
	ctx := ctxT(t)

	before := led.Term()
	_, err := c.Resign(ctx)
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "no leader is known") {
		t.Fatalf("Resign = %v; want the first node's Unavailable", err)
	}
	var ne *client.NoEndpointError
	if errors.As(err, &ne) {
		t.Fatal("an answer was reported as no endpoint answering")
	}
	if led.Term() != before {
		t.Fatal("the second endpoint was asked too")
	}
	_, err = c.Kill(ctx, 7, false)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Kill 7 = %v; want NotFound", err)
	}
	li, err := c.Leader(ctx)
	if err != nil || li.HasLeader() || li.State != node.StateElecting {
		t.Fatalf("Leader = %+v, %v; want the first node's no-leader view", li, err)
	}
}

func TestCommands(t *testing.T) {
	cl := apitest.NewCluster(3)
	cl.Elect(3)
	s1 := serve(t, cl, 1)
	serve(t, cl, 2)
	serve(t, cl, 3)
	c := newClient(t, []string{s1.Addr})
	ctx := ctxT(t)

	if r, err := c.Transfer(ctx, 2); err != nil || r.Leader.ID != 2 {
		t.Fatalf("Transfer 2 = %+v, %v", r, err)
	}
	if r, err := c.Resign(ctx); err != nil || r.Leader.ID != 3 || !strings.Contains(r.Message, "node 2 resigned") {
		t.Fatalf("Resign = %+v, %v", r, err)
	}
	if _, err := c.Kill(ctx, 2, false); err != nil || !cl.Killed(2) {
		t.Fatalf("Kill 2 = %v", err)
	}
	if _, err := c.Revive(ctx, 2); err != nil || cl.Killed(2) {
		t.Fatalf("Revive 2 = %v", err)
	}
	if _, err := c.Kill(ctx, 3, true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cl.Node(3).Exited():
	case <-ctx.Done():
		t.Fatal("kill --exit did not reach node 3")
	}
}

func next(t *testing.T, ch <-chan client.Event) client.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return client.Event{}
}

// nextLeader skips error events.
func nextLeader(t *testing.T, ch <-chan client.Event) client.Event {
	t.Helper()
	for {
		if ev := next(t, ch); ev.Err == nil {
			return ev
		}
	}
}

func TestWatchResumesOnSecondServer(t *testing.T) {
	// Two separate views: the second node lags one term behind the first.
	ahead, behind := apitest.NewCluster(2), apitest.NewCluster(2)
	ahead.Elect(1)
	ahead.Elect(2)
	behind.Elect(1)
	s1, s2 := serve(t, ahead, 1), serve(t, behind, 2)
	c := newClient(t, []string{s1.Addr, s2.Addr}, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx, cancel := context.WithCancel(ctxT(t))
	w := c.Watch(ctx)

	ev := next(t, w)
	if ev.Err != nil || ev.Endpoint != s1.Addr || ev.Leader.ID != 2 || ev.Seq != 1 || ev.Resumed {
		t.Fatalf("first event %+v", ev)
	}
	seen := ev.Leader.Term

	s1.Stop() // the watched server goes away
	ev = next(t, w)
	if ev.Err == nil || ev.Endpoint != s1.Addr {
		t.Fatalf("want a stream-ended event from %s, got %+v", s1.Addr, ev)
	}
	// The second server's current view (term 1.1) is older than what was
	// seen (2.2): the resumed stream skips it until the node catches up.
	if err := behind.Node(2).WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	behind.Elect(2) // 2.2 == seen: delivered
	ev = nextLeader(t, w)
	if ev.Endpoint != s2.Addr || !ev.Resumed || ev.Seq != 1 || ev.Leader.Term != seen || ev.Leader.ID != 2 || !ev.Leader.Self {
		t.Fatalf("resumed event %+v; want node 2's view at term %s", ev, seen)
	}
	behind.Elect(1)
	ev = nextLeader(t, w)
	if ev.Endpoint != s2.Addr || ev.Resumed || ev.Seq != 2 || ev.Leader.ID != 1 || ev.Leader.Term <= seen {
		t.Fatalf("next event %+v", ev)
	}
	cancel()
	for range w { // closes when ctx ends
	}
}

func TestWatchWaitsForAnEndpoint(t *testing.T) {
	addr := closedAddr(t)
	c := newClient(t, []string{addr}, client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	w := c.Watch(ctx)
	ev := next(t, w)
	var ne *client.NoEndpointError
	if !errors.As(ev.Err, &ne) {
		t.Fatalf("first event %+v; want a NoEndpointError", ev)
	}
	// The node starts on that address; Watch finds it.
	cl := apitest.NewCluster(1)
	cl.Elect(1)
	s, err := apitest.ServeAt(addr, cl.Node(1))
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err)
	}
	defer s.Stop()
	ev = nextLeader(t, w)
	if ev.Leader.ID != 1 || ev.Endpoint != addr {
		t.Fatalf("event %+v", ev)
	}
}

func TestWatchEndsOnClose(t *testing.T) {
	cl := apitest.NewCluster(1)
	s := serve(t, cl, 1)
	c, err := client.New(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(ctxT(t))
	nextLeader(t, w)
	c.Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w:
			if !ok {
				if _, err := c.Leader(context.Background()); !errors.Is(err, client.ErrClosed) {
					t.Fatalf("Leader after Close = %v", err)
				}
				return
			}
		case <-timeout:
			t.Fatal("watch channel still open after Close")
		}
	}
}

func TestDeadlines(t *testing.T) {
	t.Run("caller deadline while connecting", func(t *testing.T) {
		c := newClient(t, []string{silentAddr(t)}, client.WithDialTimeout(10*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Leader(ctx)
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.HasPrefix(err.Error(), "deadline exceeded before an endpoint answered") {
			t.Fatalf("err = %v (code %v)", err, status.Code(err))
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("dial timeout moves on", func(t *testing.T) {
		cl := apitest.NewCluster(1)
		s := serve(t, cl, 1)
		hung := silentAddr(t)
		c := newClient(t, []string{hung, s.Addr}, client.WithDialTimeout(150*time.Millisecond))
		li, err := c.Leader(ctxT(t))
		if err != nil || li.State != node.StateElecting {
			t.Fatalf("Leader = %+v, %v", li, err)
		}
		// Both hung: the error names the timeout.
		c2 := newClient(t, []string{hung}, client.WithDialTimeout(100*time.Millisecond))
		_, err = c2.Leader(ctxT(t))
		if want := hung + ": no connection within 100ms"; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v; want Unavailable with %q", err, want)
		}
	})
	t.Run("server command outlives the deadline", func(t *testing.T) {
		cl := apitest.NewCluster(2)
		cl.Elect(1)
		serve(t, cl, 1)
		s2 := serve(t, cl, 2)
		cl.SetBlocked(true)
		c := newClient(t, []string{s2.Addr})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := c.Resign(ctx) // forwarded to 1, which is stuck
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err = %v; want DeadlineExceeded", err)
		}
	})
}

// LeaderInfo's JSON is the sidecar's /leader JSON: the same field names.
func TestLeaderInfoJSONMatchesNode(t *testing.T) {
	tags := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			out = append(out, rt.Field(i).Tag.Get("json"))
		}
		return out
	}
	if a, b := tags(client.LeaderInfo{}), tags(node.LeaderInfo{}); !reflect.DeepEqual(a, b) {
		t.Fatalf("client %v != node %v", a, b)
	}
	b, _ := json.Marshal(client.LeaderInfo{Term: 65539})
	if !strings.Contains(string(b), `"term":65539`) {
		t.Fatalf("term is not a number: %s", b)
	}
}
