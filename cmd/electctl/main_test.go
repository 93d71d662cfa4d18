package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/election"
)

// fixture is a fake three-node cluster, node 3 leading in term 1.3, each
// node serving its api on loopback.
type fixture struct {
	c     *apitest.Cluster
	srvs  []*apitest.Server
	addrs []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := apitest.NewCluster(3)
	c.Elect(3)
	srvs, err := c.ServeAll()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{c: c, srvs: srvs}
	for _, s := range srvs {
		t.Cleanup(s.Stop)
		f.addrs = append(f.addrs, s.Addr)
	}
	return f
}

// addr returns the api address of node id.
func (f *fixture) addr(id int) string { return f.addrs[id-1] }

type result struct {
	code           int
	stdout, stderr string
}

func electctl(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func (r result) want(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || r.stdout != stdout || r.stderr != stderr {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr, code, stdout, stderr)
	}
}

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

// columns splits table output into rows of fields.
func columns(s string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func jsonKeys(t *testing.T, s string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var leaderKeys = []string{"address", "id", "name", "self", "since", "state", "term", "term_epoch_slot"}

func TestLeader(t *testing.T) {
	f := newFixture(t)
	r := electctl(t, "--endpoints", f.addr(1), "leader")
	r.want(t, 0, "ID  NAME    ADDRESS"+strings.Repeat(" ", len(f.addr(3))-7+2)+"TERM  FENCING TOKEN  SINCE                 SELF   STATE\n"+
		"3   node-3  "+f.addr(3)+"  1.3   65539          2027-01-15T08:00:01Z  false  follower\n", "")

	r = electctl(t, "--endpoints", f.addr(3), "leader", "-o", "json")
	want := fmt.Sprintf(`{
  "id": 3,
  "name": "node-3",
  "address": %q,
  "term": 65539,
  "since": "2027-01-15T08:00:01Z",
  "self": true,
  "state": "leader",
  "term_epoch_slot": "1.3"
}
`, f.addr(3))
	r.want(t, 0, want, "")
	if got := jsonKeys(t, r.stdout); !reflect.DeepEqual(got, leaderKeys) {
		t.Fatalf("keys %v; want the /leader fields %v", got, leaderKeys)
	}

	f.c.NoLeader()
	electctl(t, "--endpoints", f.addr(1), "leader").want(t, ExitFailedPrecondition, "",
		"electctl: no leader known (node is electing; last leadership term 1.3 (fencing token 65539))\n")
	electctl(t, "--endpoints", f.addr(1), "leader", "-o", "json").want(t, ExitFailedPrecondition,
		"{\n  \"state\": \"no_leader\",\n  \"term\": 65539,\n  \"term_epoch_slot\": \"1.3\"\n}\n",
		"electctl: no leader known (node is electing; last leadership term 1.3 (fencing token 65539))\n")
}

func TestNoEndpoint(t *testing.T) {
	dead := closedAddr(t)
	for _, args := range [][]string{
		{"leader"}, {"status"}, {"members"}, {"watch"}, {"kill", "1"}, {"revive", "1"}, {"resign"}, {"transfer", "1"},
	} {
		r := electctl(t, append([]string{"--endpoints", dead}, args...)...)
		r.want(t, ExitUnavailable, "", "electctl: no endpoint answered ("+dead+": connection refused)\n")
	}
	// Two endpoints: both named, in order, on one line.
	dead2 := closedAddr(t)
	electctl(t, "--endpoints", dead+","+dead2, "leader").want(t, ExitUnavailable, "",
		"electctl: no endpoint answered ("+dead+": connection refused; "+dead2+": connection refused)\n")
}

func TestFailover(t *testing.T) {
	f := newFixture(t)
	r := electctl(t, "--endpoints", closedAddr(t)+","+f.addr(2), "leader", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"id": 3`) || !strings.Contains(r.stdout, `"state": "follower"`) {
		t.Fatalf("%+v", r)
	}
}

func TestStatus(t *testing.T) {
	f := newFixture(t)
	f.c.Node(1).Kill(context.Background())
	r := electctl(t, "--endpoints", f.addr(2), "status")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	rows := columns(r.stdout)
	want := [][]string{
		strings.Fields("node 2 (bully), leader: 3 (node-3) at " + f.addr(3) + ", term 1.3 (fencing token 65539)"),
		{},
		{"ID", "NAME", "ADDRESS", "ALIVE", "ROLE", "TERM", "FENCING", "TOKEN", "ALGORITHM"},
		{"1", "node-1", f.addr(1), "false", "unknown", "unknown", "unknown", "bully"},
		{"2*", "node-2", f.addr(2), "true", "follower", "1.3", "65539", "bully"},
		{"3", "node-3", f.addr(3), "true", "leader", "1.3", "65539", "bully"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("status:\n%s\nrows %q\nwant %q", r.stdout, rows, want)
	}

	r = electctl(t, "--endpoints", f.addr(2), "-o", "json", "status")
	var st struct {
		Self      uint64                     `json:"self_id"`
		Algorithm string                     `json:"algorithm"`
		Leader    map[string]json.RawMessage `json:"leader"`
		Members   []map[string]any           `json:"members"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("%+v: %v", r, err)
	}
	var lk []string
	for k := range st.Leader {
		lk = append(lk, k)
	}
	slices.Sort(lk)
	if st.Self != 2 || st.Algorithm != "bully" || !reflect.DeepEqual(lk, leaderKeys) || len(st.Members) != 3 ||
		st.Members[0]["alive"] != false || st.Members[2]["role"] != "leader" || st.Members[2]["term"] != float64(65539) || st.Members[2]["term_epoch_slot"] != "1.3" ||
		st.Members[2]["api_address"] != f.addr(3) {
		t.Fatalf("status json:\n%s", r.stdout)
	}
}

func TestMembers(t *testing.T) {
	f := newFixture(t)
	r := electctl(t, "--endpoints", f.addr(1), "members")
	rows := columns(r.stdout)
	if r.code != 0 || len(rows) != 4 || !reflect.DeepEqual(rows[0], []string{"ID", "NAME", "PRIORITY", "PEER", "ADDRESS", "API", "ADDRESS", "ALIVE", "ROLE"}) ||
		!reflect.DeepEqual(rows[3], []string{"3", "node-3", "3", "127.0.0.1:0", f.addr(3), "true", "leader"}) {
		t.Fatalf("%+v", r)
	}
	r = electctl(t, "--endpoints", f.addr(1), "members", "-o", "json")
	var ms []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || r.code != 0 || len(ms) != 3 {
		t.Fatalf("%+v: %v", r, err)
	}
	var keys []string
	for k := range ms[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"algorithm", "alive", "api_address", "id", "name", "peer_address", "priority", "role", "term", "term_epoch_slot"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("member keys %v; want %v", keys, want)
	}
}

func TestKillReviveCommands(t *testing.T) {
	f := newFixture(t)
	ep := "--endpoints=" + f.addr(1)

	// One line that says what happened (issue 14: a second line
	// "leader: no leader (term 1.3, node is no_leader)", the killed node's view).
	electctl(t, ep, "kill", "2").want(t, 0, "node 2 killed: it no longer answers its peers\n", "")
	if !f.c.Killed(2) {
		t.Fatal("node 2 not killed")
	}
	r := electctl(t, ep, "-o", "json", "revive", "2")
	var res struct {
		Message string         `json:"message"`
		Leader  map[string]any `json:"leader"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.Message != "node 2 revived: it rejoins from its persisted term" || res.Leader["id"] != float64(3) {
		t.Fatalf("%+v: %v", r, err)
	}
	if f.c.Killed(2) {
		t.Fatal("node 2 still killed")
	}

	// A command that changes nothing says so.
	electctl(t, ep, "revive", "2").want(t, 0, "node 2 was not killed: nothing to revive\n", "")
	electctl(t, ep, "kill", "1").want(t, 0, "node 1 killed: it no longer answers its peers\n", "")
	electctl(t, ep, "kill", "1").want(t, 0, "node 1 was killed already: nothing changed\n", "")
	electctl(t, ep, "revive", "1").want(t, 0, "node 1 revived: it rejoins from its persisted term\n", "")

	electctl(t, ep, "kill", "9").want(t, ExitNotFound, "", "electctl: node 9 is not a member (members: 1, 2, 3)\n")
	electctl(t, ep, "revive", "9").want(t, ExitNotFound, "", "electctl: node 9 is not a member (members: 1, 2, 3)\n")

	// kill --exit that the node does not carry out: its api still answers
	// when --timeout ends, exit 6 (issue 14: "node 4 is exiting", exit 0).
	r = electctl(t, ep, "--timeout", "1s", "kill", "2", "--exit")
	if r.code != ExitDeadline || !strings.Contains(r.stdout, "still answers after --timeout 1s") ||
		!strings.Contains(r.stderr, "node 2 still answers at "+f.addr(2)) {
		t.Fatalf("kill 2 --exit, node 2 keeps serving: %+v", r)
	}
	// kill --exit of the leader: forwarded, node 3's process "exits" (its
	// port closes; the connection that carries the reply stays), and
	// electctl sees the port close.
	f.srvs[2].Stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv3 := api.NewGRPCServer(f.c.Node(3))
	go srv3.Serve(lis)
	defer srv3.Stop()
	f.c.SetAPIAddr(3, lis.Addr().String())
	go func() {
		<-f.c.Node(3).Exited()
		lis.Close()
	}()
	r = electctl(t, ep, "kill", "3", "--exit")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "node 3 is exiting: ") || !strings.HasSuffix(r.stdout, "; its api at "+lis.Addr().String()+" is closed now\n") ||
		strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestResignTransferCommands(t *testing.T) {
	f := newFixture(t)
	ep := "--endpoints=" + f.addr(1)

	electctl(t, ep, "resign").want(t, 0, "node 3 resigned; node 2 leads now, term 2.2 (fencing token 131074)\n", "")
	electctl(t, ep, "transfer", "1").want(t, 0, "node 2 handed leadership to node 1; node 1 leads now, term 3.1 (fencing token 196609)\n", "")
	electctl(t, ep, "transfer", "1").want(t, 0, "node 1 already leads, term 3.1 (fencing token 196609)\n", "")
	electctl(t, ep, "transfer", "9").want(t, ExitNotFound, "", "electctl: node 9 is not a member (members: 1, 2, 3)\n")

	// The target cannot lead: the leader refuses (failed precondition).
	f.c.Node(2).Kill(context.Background())
	electctl(t, ep, "transfer", "2").want(t, ExitFailedPrecondition, "", "electctl: "+election.ErrNoCandidate.Error()+"\n")

	// No leader: nothing to forward to.
	f.c.NoLeader()
	electctl(t, ep, "resign").want(t, ExitUnavailable, "",
		"electctl: resign: no leader is known (node 1 is electing, term 3.1); retry once one is elected\n")

	// A stuck leader: --timeout ends the call.
	f.c.Elect(3)
	f.c.SetBlocked(true)
	r := electctl(t, ep, "--timeout", "200ms", "resign")
	if r.code != ExitDeadline || r.stdout != "" || !strings.HasPrefix(r.stderr, "electctl: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"leader", "--nope"},
		{"leader", "extra"},
		{"kill"},
		{"kill", "abc"},
		{"kill", "0"},
		{"transfer", "1", "2"},
		{"-o", "yaml", "leader"},
		{"--timeout", "0s", "leader"},
		{"--endpoints", "", "leader"},
		{"watch", "--count", "-1"},
	} {
		r := electctl(t, args...)
		if r.code != ExitUsage || r.stdout != "" || !strings.HasSuffix(r.stderr, "Run 'electctl --help' for usage.\n") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

func TestHelpListsExitCodes(t *testing.T) {
	r := electctl(t, "--help")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	for _, e := range exitCodes {
		if !strings.Contains(r.stdout, fmt.Sprintf("  %d  %s\n", e.code, e.text)) {
			t.Errorf("--help lacks exit code %d", e.code)
		}
	}
	for _, sub := range []string{"status", "leader", "watch", "members", "kill", "revive", "resign", "transfer"} {
		if !strings.Contains(r.stdout, "\n  "+sub+" ") {
			t.Errorf("--help lacks %s", sub)
		}
	}
}

// watchRun runs "electctl watch" in the background; its stdout arrives line
// by line.
func watchRun(t *testing.T, ctx context.Context, args ...string) (lines <-chan string, done <-chan result) {
	t.Helper()
	pr, pw := io.Pipe()
	ls := make(chan string, 16)
	res := make(chan result, 1)
	var errb bytes.Buffer
	go func() {
		code := run(ctx, args, pw, &errb)
		pw.Close()
		res <- result{code: code, stderr: errb.String()}
	}()
	go func() {
		defer close(ls)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			ls <- sc.Text()
		}
	}()
	return ls, res
}

func line(t *testing.T, ls <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-ls:
		if !ok {
			t.Fatal("output ended")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no output within 10s")
	}
	return ""
}

func TestWatch(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ls, done := watchRun(t, ctx, "--endpoints", f.addr(1), "watch", "--count", "3")
	if got, want := line(t, ls), "#1 leader 3 (node-3) at "+f.addr(3)+", term 1.3 (fencing token 65539); node "+f.addr(1)+" is follower"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	f.c.NoLeader()
	if got, want := line(t, ls), "#2 no leader known (last leadership term 1.3 (fencing token 65539)); node "+f.addr(1)+" is electing"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	f.c.Elect(1)
	if got, want := line(t, ls), "#3 leader 1 (node-1) at "+f.addr(1)+", term 2.1 (fencing token 131073); node "+f.addr(1)+" is leader"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if r := <-done; r.code != 0 || r.stderr != "" { // --count 3 reached
		t.Fatalf("%+v", r)
	}

	// JSON, one object per line; Ctrl-C (context cancel) ends it with 0.
	wctx, stop := context.WithCancel(ctx)
	ls, done = watchRun(t, wctx, "--endpoints", f.addr(2), "watch", "-o", "json")
	l := line(t, ls)
	want := append(slices.Clone(leaderKeys), "dropped", "endpoint", "seq")
	slices.Sort(want)
	if got := jsonKeys(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("keys %v; want %v", got, want)
	}
	if !strings.Contains(l, `"id":1,`) || !strings.Contains(l, `"seq":1,`) || !strings.Contains(l, `"term":131073,`) || !strings.Contains(l, `"term_epoch_slot":"2.1",`) {
		t.Fatalf("line %s", l)
	}
	stop()
	if r := <-done; r.code != 0 {
		t.Fatalf("%+v", r)
	}
}

// The watched node goes away: watch goes on with the next endpoint, whose
// first event is its current view (marked resumed).
func TestWatchFailover(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ls, done := watchRun(t, ctx, "--endpoints", f.addr(1)+","+f.addr(2), "watch", "--count", "2")
	line(t, ls)
	f.srvs[0].Stop()
	got := line(t, ls)
	if want := "#1 leader 3 (node-3) at " + f.addr(3) + ", term 1.3 (fencing token 65539); node " + f.addr(2) + " is follower (resumed)"; got != want {
		t.Fatalf("line after failover\n%q\nwant\n%q", got, want)
	}
	r := <-done
	if r.code != 0 || !strings.HasPrefix(r.stderr, "electctl: watch: watch stream from "+f.addr(1)+" ended: ") ||
		!strings.HasSuffix(r.stderr, "; retrying\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("%+v", r)
	}
}
