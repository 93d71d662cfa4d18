package status_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/security"
	"github.com/electord/electord/status"
)

// startCluster starts a three-node bully cluster and returns it, the
// leader its nodes agree on, and a follower's index in c.Nodes (whose page
// the tests open). Which node leads depends on who joined gossip first (a
// leader stays without preempt): the tests follow the cluster.
func startCluster(t *testing.T) (c *devcluster.Cluster, leader election.NodeID, viewer int) {
	t.Helper()
	c, err := devcluster.Start(devcluster.Options{Nodes: 3, Algorithm: "bully", LogLevel: "warn"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	leader = waitLeader(t, c, 0)
	for i, d := range c.Nodes {
		if d.Node.Self() != leader {
			viewer = i
			break
		}
	}
	return c, leader, viewer
}

// waitLeader waits until every live node names the same leader, other than
// not, and returns it.
func waitLeader(t *testing.T, c *devcluster.Cluster, not election.NodeID) election.NodeID {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var first election.NodeID
		ok := true
		for _, d := range c.Nodes {
			if d.Node.Status().Killed {
				continue
			}
			if id := d.Node.Leader().ID; id == 0 || (first != 0 && id != first) {
				ok = false
			} else {
				first = id
			}
		}
		if ok && first != 0 && first != not {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live nodes did not agree on a leader (other than %d) within 10s", not)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// leaderIs matches the leader card naming id (not a timeline row's);
// anyLeader one naming a leader.
func leaderIs(id election.NodeID) string { return fmt.Sprintf(`id="leader" data-leader="%d"`, id) }

const anyLeader = `id="leader" data-leader="[1-9]`

// leaderOtherThan matches the leader card naming a member of c other than
// not.
func leaderOtherThan(c *devcluster.Cluster, not election.NodeID) string {
	var ids []string
	for _, d := range c.Nodes {
		if id := d.Node.Self(); id != not {
			ids = append(ids, strconv.FormatUint(uint64(id), 10))
		}
	}
	return `id="leader" data-leader="(` + strings.Join(ids, "|") + `)"`
}

// stream reads a status event stream.
type stream struct {
	t     *testing.T
	body  io.ReadCloser
	r     *bufio.Reader
	views chan string
}

func openStream(t *testing.T, url string) (*stream, *http.Response) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp
	}
	s := &stream{t: t, body: resp.Body, r: bufio.NewReader(resp.Body), views: make(chan string, 64)}
	go func() {
		defer close(s.views)
		var data []string
		event := ""
		for {
			line, err := readLine(s.r)
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case line == "" && data != nil:
				if event != "view" {
					// What a browser would dispatch as another event: the
					// stream was split by the data.
					s.views <- "unexpected event " + strconv.Quote(event) + ": " + strings.Join(data, "\n")
				} else {
					s.views <- strings.Join(data, "\n")
				}
				data, event = nil, ""
			case line == "":
				event = ""
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s, resp
}

// readLine reads one line as an SSE client does: it ends at CRLF, CR or
// LF.
func readLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		c, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		switch c {
		case '\n':
			return b.String(), nil
		case '\r':
			if next, err := r.Peek(1); err == nil && next[0] == '\n' {
				r.ReadByte()
			}
			return b.String(), nil
		}
		b.WriteByte(c)
	}
}

// until returns the first view that matches every pattern, within d.
func (s *stream) until(d time.Duration, patterns ...string) string {
	s.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	last := ""
	for {
		select {
		case v, ok := <-s.views:
			if !ok {
				s.t.Fatalf("the stream ended; last view:\n%s", last)
			}
			last = v
			if strings.HasPrefix(v, "unexpected event") || !strings.HasSuffix(strings.TrimSpace(v), "</section>") {
				s.t.Fatalf("the stream was split: a browser gets\n%s", v)
			}
			if matchAll(v, patterns) {
				return v
			}
		case <-timer.C:
			s.t.Fatalf("no view matching %q within %v; last view:\n%s", patterns, d, last)
		}
	}
}

func matchAll(v string, patterns []string) bool {
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(v) {
			return false
		}
	}
	return true
}

// TestStatusPageFollowsAFailover: the page on a follower shows the leader,
// every member alive, and agreement; after the leader is killed its event
// stream brings the new leader in a higher term, the killed node as
// killed, and a longer timeline.
func TestStatusPageFollowsAFailover(t *testing.T) {
	c, leader, viewer := startCluster(t)
	base := "http://" + c.Nodes[viewer].HealthAddr

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, err := resp.Location(); err != nil || resp.StatusCode != http.StatusFound || loc.String() != base+"/status" {
		t.Fatalf("GET /: %s to %q (%v), want a redirect to %s/status", resp.Status, resp.Header.Get("Location"), err, base)
	}
	resp, err = http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	before := c.Nodes[viewer].Node.Leader().Term
	for _, want := range []string{leaderIs(leader), `id="member-1" class="alive"`, `id="member-2" class="alive"`, `id="member-3" class="alive"`,
		`data-disagree="false"`, `<b id="leader-term">` + before.String() + `</b>`, `"status/static/status.js"`} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("GET /status: %s, no %q in\n%s", resp.Status, want, page)
		}
	}
	for _, path := range []string{"/status/static/status.js", "/status/static/status.css"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}

	s, resp := openStream(t, base+"/status/events")
	if s == nil {
		t.Fatalf("GET /status/events: %s", resp.Status)
	}
	first := s.until(5*time.Second, anyLeader, `data-disagree="false"`)
	count := regexp.MustCompile(`id="timeline" data-count="(\d+)"`).FindStringSubmatch(first)[1]

	// On a loaded host leadership may have moved since: kill whoever leads now.
	leader = waitLeader(t, c, 0)
	if leader == c.Nodes[viewer].Node.Self() {
		t.Fatalf("leadership moved to node %d, whose page the test reads (a heavily loaded host)", leader)
	}
	if err := c.Nodes[leader-1].Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := s.until(10*time.Second, leaderOtherThan(c, leader), fmt.Sprintf(`id="member-%d" class="(killed|dead|suspect)"`, leader), `data-disagree="false"`)
	m := regexp.MustCompile(`id="leader" data-leader="\d+" data-term="([0-9.]+)" data-token="(\d+)"`).FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("no term in the view after the failover:\n%s", after)
	}
	if tok, _ := strconv.ParseUint(m[2], 10, 64); election.Term(tok) <= before || election.Term(tok).String() != m[1] {
		t.Fatalf("after the failover the view shows term %s, token %s; before it was %v (token %d)", m[1], m[2], before, uint64(before))
	}
	if n := regexp.MustCompile(`id="timeline" data-count="(\d+)"`).FindStringSubmatch(after)[1]; atoi(n) <= atoi(count) {
		t.Fatalf("the timeline did not grow: %s -> %s changes", count, n)
	}
}

// TestStatusEventStreamsAreBoundedAndStopWhenClosed: streams beyond
// MaxClients are refused with 503; the poller builds views only while a
// stream is open, and stops with the last one.
func TestStatusEventStreamsAreBoundedAndStopWhenClosed(t *testing.T) {
	c, leader, viewer := startCluster(t)
	srv, hs := serve(t, status.Config{Node: c.Nodes[viewer].Node, MaxClients: 2, MaxClientsPerAddr: 2, Poll: 20 * time.Millisecond})

	<-srv.Idle()
	idle := srv.Renders()
	s1, _ := openStream(t, hs.URL+"/status/events")
	s2, _ := openStream(t, hs.URL+"/status/events")
	if s1 == nil || s2 == nil {
		t.Fatal("the first two streams were refused")
	}
	s1.until(5*time.Second, anyLeader)
	s2.until(5*time.Second, anyLeader)
	if s3, resp := openStream(t, hs.URL+"/status/events"); s3 != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third stream with MaxClients 2: %s, want 503", resp.Status)
	} else if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "2 status pages are open") {
		t.Fatalf("the refusal says %q; it should say why", body)
	}
	// The members are asked every Poll while a page is open.
	deadline := time.Now().Add(5 * time.Second)
	for srv.Renders() < idle+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d views built in 5s with pages open, polling every 20ms", srv.Renders()-idle)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	s1.body.Close()
	s2.body.Close()
	select {
	case <-waitIdle(srv):
	case <-time.After(5 * time.Second):
		t.Fatalf("the poller still runs 5s after the last page closed (%d streams open)", srv.Clients())
	}
	n := srv.Renders()
	// A node event with no page open builds nothing.
	leader = waitLeader(t, c, 0)
	if err := c.Nodes[leader-1].Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, c, leader)
	if got := srv.Renders(); got != n {
		t.Fatalf("%d views built with no page open", got-n)
	}
}

// serve serves a status page of cfg on an httptest server, closed at the
// end of the test after the test's own cleanups (a stream's body closed in
// a cleanup registered later is closed first).
func serve(t *testing.T, cfg status.Config) (*status.Server, *httptest.Server) {
	t.Helper()
	srv, err := status.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv.Mount(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return srv, hs
}

// waitIdle is closed once no stream is open and the poller returned.
func waitIdle(srv *status.Server) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for srv.Clients() > 0 {
			time.Sleep(5 * time.Millisecond) // polling interval
		}
		<-srv.Idle()
		close(ch)
	}()
	return ch
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestOpenPageDoesNotHoldUpStop: a node with a page open stops as fast as
// one without (the stream ends with the node, so the server's shutdown
// does not wait for it), and the page's stream ends.
func TestOpenPageDoesNotHoldUpStop(t *testing.T) {
	c, _, viewer := startCluster(t)
	s, resp := openStream(t, "http://"+c.Nodes[viewer].HealthAddr+"/status/events")
	if s == nil {
		t.Fatalf("GET /status/events: %s", resp.Status)
	}
	s.until(5*time.Second, anyLeader)
	start := time.Now()
	if err := c.Nodes[viewer].Stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a follower with a status page open took %v to stop", took)
	}
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-s.views:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatal("the page's stream still runs 5s after its node stopped")
		}
	}
}

// TestStatusPageAsksMembersOverTLS: on a cluster with TLS on, the page asks
// the other members who leads with the node's own certificate: every
// member answers (none is suspect) and they agree. A status page that
// dialled the members' TLS API in plaintext would show them suspect.
func TestStatusPageAsksMembersOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, "status-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		if _, _, err := ca.IssueNode(dir, id, []string{"127.0.0.1"}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	c, err := devcluster.Start(devcluster.Options{Nodes: 3, Algorithm: "bully", LogLevel: "warn", Tune: func(cfg *config.Config) {
		cfg.TLSCA = filepath.Join(dir, security.CACertFile)
		cfg.TLSCert, cfg.TLSKey = security.NodeFiles(dir, cfg.ID)
		cfg.Cluster = "status-test"
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	waitLeader(t, c, 0)
	if c.Nodes[0].Security == nil {
		t.Fatal("the cluster runs without TLS")
	}
	s, resp := openStream(t, "http://"+c.Nodes[0].HealthAddr+"/status/events")
	if s == nil {
		t.Fatalf("GET /status/events: %s", resp.Status)
	}
	patterns := []string{`data-disagree="false"`, anyLeader}
	for id := election.NodeID(1); id <= 3; id++ {
		patterns = append(patterns, fmt.Sprintf(`id="member-%d" class="alive" data-id="%d" data-liveness="alive" data-role="(leader|follower)" data-differs="false" data-sees="[1-3]"`,
			id, id))
	}
	s.until(10*time.Second, patterns...)
}

// TestPageLoadsShareOneView: page loads with no page open ask the members
// at most once per Poll, however many there are.
func TestPageLoadsShareOneView(t *testing.T) {
	c, _, viewer := startCluster(t)
	srv, hs := serve(t, status.Config{Node: c.Nodes[viewer].Node, Poll: time.Hour})
	for range 20 {
		resp, err := http.Get(hs.URL + "/status")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !regexp.MustCompile(anyLeader).Match(page) {
			t.Fatalf("GET /status: %s\n%s", resp.Status, page)
		}
	}
	if n := srv.Renders(); n != 1 {
		t.Fatalf("20 page loads within one Poll built %d views, want 1", n)
	}
}

// TestCarriageReturnDoesNotSplitAnEvent: a member's name (set by that
// node's --name and carried by gossip) with bare CRs that spell SSE fields
// cannot end a data: line, inject an event or replace the page: every
// event a client parses (lines end at CR, LF or CRLF) is one whole view,
// and the name is in it.
func TestCarriageReturnDoesNotSplitAnEvent(t *testing.T) {
	const evil = "evil\revent: view\r\rdata: <b>All agree</b>\r\r"
	c, err := devcluster.Start(devcluster.Options{Nodes: 2, Algorithm: "bully", LogLevel: "warn", Tune: func(cfg *config.Config) {
		if cfg.ID == 2 {
			cfg.Name = evil
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	waitLeader(t, c, 0)
	s, resp := openStream(t, "http://"+c.Nodes[0].HealthAddr+"/status/events")
	if s == nil {
		t.Fatalf("GET /status/events: %s", resp.Status)
	}
	// until fails on a view that is not whole.
	s.until(10*time.Second, `id="member-2" class="alive"`, regexp.QuoteMeta("<td>evil\nevent: view\n\ndata: &lt;b&gt;All agree&lt;/b&gt;\n\n</td>"))
}

// TestPollerClosesConnectionsToGoneMembers: while a page is open the
// poller keeps one connection per live member, and after each round it
// closes the connections to members it no longer asks (a member that
// stopped, a pod that came back with a new address), instead of keeping
// them, reconnecting, until the last page closes.
func TestPollerClosesConnectionsToGoneMembers(t *testing.T) {
	c, _, viewer := startCluster(t)
	srv, err := status.New(status.Config{Node: c.Nodes[viewer].Node})
	if err != nil {
		t.Fatal(err)
	}
	p := srv.NewPoller()
	defer p.Close()
	others := map[string]election.NodeID{}
	for _, m := range c.Nodes[viewer].Node.Members() {
		if m.ID != c.Nodes[viewer].Node.Self() {
			others[m.APIAddr] = m.ID
		}
	}
	if _, err := p.Render(); err != nil {
		t.Fatal(err)
	}
	if got := p.Conns(); len(got) != 2 || others[got[0]] == 0 || others[got[1]] == 0 {
		t.Fatalf("connections after one round: %v, want the other members' %v", got, others)
	}
	// Stop a member other than the viewer; once the viewer's gossip says
	// it is gone, the next round closes its connection.
	gone := (viewer + 1) % len(c.Nodes)
	goneAddr := ""
	for addr, id := range others {
		if id == c.Nodes[gone].Node.Self() {
			goneAddr = addr
		}
	}
	if err := c.Nodes[gone].Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive := true; alive; {
		alive = false
		for _, m := range c.Nodes[viewer].Node.Members() {
			if m.APIAddr == goneAddr && m.Alive {
				alive = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d still alive to node %d 10s after it stopped", c.Nodes[gone].Node.Self(), c.Nodes[viewer].Node.Self())
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	if _, err := p.Render(); err != nil {
		t.Fatal(err)
	}
	if got := p.Conns(); len(got) != 1 || got[0] == goneAddr {
		t.Fatalf("connections after node %d (%s) stopped: %v, want only the live member's", c.Nodes[gone].Node.Self(), goneAddr, got)
	}
}

// TestConcurrentPageLoadsShareOneView: many page loads at once with no
// page open build one view (they wait for it), not one each: a reload
// flood cannot make the node ask the members once per request.
func TestConcurrentPageLoadsShareOneView(t *testing.T) {
	c, _, viewer := startCluster(t)
	srv, hs := serve(t, status.Config{Node: c.Nodes[viewer].Node, Poll: time.Hour})
	errs := make(chan error, 30)
	for range 30 {
		go func() {
			resp, err := http.Get(hs.URL + "/status")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET /status: %s", resp.Status)
				}
			}
			errs <- err
		}()
	}
	for range 30 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Renders(); n != 1 {
		t.Fatalf("30 concurrent page loads within one Poll built %d views, want 1", n)
	}
}

// TestGivenUpLoadDoesNotSpoilTheSharedView: the view built for a page
// load is shared with the loads of the next Poll, so it is built whole
// even when the load that built it gave up: the next load shows the
// members alive, not "suspect: canceled".
func TestGivenUpLoadDoesNotSpoilTheSharedView(t *testing.T) {
	c, _, viewer := startCluster(t)
	srv, err := status.New(status.Config{Node: c.Nodes[viewer].Node, Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv.Mount(mux)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/status", nil))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	if n := srv.Renders(); n != 1 {
		t.Fatalf("two loads built %d views, want 1 (shared)", n)
	}
	for _, d := range c.Nodes {
		if want := fmt.Sprintf(`id="member-%d" class="alive"`, d.Node.Self()); !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("no %q after a load that gave up built the shared view:\n%s", want, rec.Body.String())
		}
	}
}

// TestStreamsPerAddressAreBounded: one remote address can hold at most
// MaxClientsPerAddr streams (503 saying so beyond), so it cannot take all
// MaxClients; another address still gets one.
func TestStreamsPerAddressAreBounded(t *testing.T) {
	c, _, viewer := startCluster(t)
	_, hs := serve(t, status.Config{Node: c.Nodes[viewer].Node, MaxClients: 4, MaxClientsPerAddr: 2})
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	open := func(cl *http.Client) *http.Response {
		resp, err := cl.Get(hs.URL + "/status/events")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	one := from("127.0.0.1")
	for i := range 2 {
		if resp := open(one); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d from 127.0.0.1: %s", i+1, resp.Status)
		}
	}
	resp := open(one)
	body := make([]byte, 512)
	n, _ := io.ReadFull(resp.Body, body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body[:n]), "2 status pages are open from 127.0.0.1") {
		t.Fatalf("a third stream from 127.0.0.1: %s %q, want 503 naming the address", resp.Status, body[:n])
	}
	if resp := open(from("127.0.0.2")); resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream from another address: %s", resp.Status)
	}
}
