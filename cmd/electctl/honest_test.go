package main

import (
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/electord/electord/client"
	"github.com/electord/electord/daemon/devcluster"
)

// Every exit code the help lists is walked: a command that ends with it,
// and the code electctl returns agrees with what the help says it means
// (issue 14: transfer to a killed member exited 4, the help promised 5).
func TestExitCodesInHelpAgree(t *testing.T) {
	help := electctl(t, "--help")
	_, codesText, ok := strings.Cut(help.stdout, "Exit codes:\n")
	if help.code != ExitOK || !ok {
		t.Fatalf("--help: %+v", help)
	}
	listed := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^  (\d)  (.*)$`).FindAllStringSubmatch(codesText, -1) {
		n, _ := strconv.Atoi(m[1])
		listed[n] = m[2]
	}
	f := newFixture(t)
	sf := newSecureFixture(t)
	bare := bareGRPC(t)
	ep := "--endpoints=" + f.addr(1)
	scenarios := map[int]func() result{
		ExitOK:    func() result { return electctl(t, ep, "leader") },
		ExitError: func() result { return electctl(t, "--endpoints", bare, "leader") },
		ExitUsage: func() result { return electctl(t, ep, "leader", "--bogus") },
		ExitUnavailable: func() result {
			return electctl(t, "--endpoints", closedAddr(t), "status")
		},
		ExitNotFound: func() result { return electctl(t, ep, "transfer", "9") },
		ExitFailedPrecondition: func() result {
			f.c.NoLeader()
			defer f.c.Elect(3)
			return electctl(t, ep, "leader")
		},
		ExitDeadline: func() result {
			f.c.SetBlocked(true)
			defer f.c.SetBlocked(false)
			return electctl(t, ep, "--timeout", "200ms", "resign")
		},
		ExitPermission: func() result { return sf.run(t, sf.reader, "kill", "2") },
	}
	// The message names what happened.
	says := map[int]string{
		ExitError: "does not serve electord's Elector API", ExitUsage: "unknown flag: --bogus",
		ExitUnavailable: "no endpoint answered", ExitNotFound: "node 9 is not a member",
		ExitFailedPrecondition: "no leader known", ExitDeadline: "deadline", ExitPermission: "admin role is required",
	}
	if len(listed) != len(scenarios) {
		t.Errorf("--help lists %d exit codes, the test walks %d: %v", len(listed), len(scenarios), listed)
	}
	for code, text := range listed {
		run, ok := scenarios[code]
		if !ok {
			t.Errorf("exit code %d (%s) in --help: no scenario produces it", code, text)
			continue
		}
		r := run()
		if r.code != code || !strings.Contains(r.stderr, says[code]) {
			t.Errorf("exit code %d (%s): got exit %d, stdout %q, stderr %q; want %q in stderr", code, text, r.code, r.stdout, r.stderr, says[code])
		}
	}
}

// bareGRPC is the address of a gRPC server with no Elector service.
func bareGRPC(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// startDev starts a dev cluster of real nodes and waits until every node
// sees node want lead.
func startDev(t *testing.T, opts devcluster.Options, want client.NodeID) *devcluster.Cluster {
	t.Helper()
	opts.LogLevel = "error"
	c, err := devcluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if want == 0 {
		return c
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, d := range c.Nodes {
		sub := d.Node.Subscribe()
		for li := range sub.C() {
			if li.ID == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d does not see node %d lead: %+v", d.Config.ID, want, li)
			}
		}
		sub.Close()
	}
	return c
}

// On real nodes: transfer to a killed member exits 5 as the help says
// (issue 14: "unknown node", exit 4), kill --exit in electord dev really
// ends the node (issue 14: "node 4 is exiting", exit 0, and it kept
// serving), and a status with no leader known shows "unknown", not "-" and
// 0.0 as if they were values.
func TestRealNodesAnswerHonestly(t *testing.T) {
	c := startDev(t, devcluster.Options{Nodes: 3}, 3)
	ep := "--endpoints=" + c.Nodes[0].APIAddr
	if r := electctl(t, ep, "kill", "2"); r.code != ExitOK {
		t.Fatalf("kill 2: %+v", r)
	}
	// Once the leader knows node 2 is down (before, it may still try, and
	// electctl then says the transfer did not hold, exit 5 too).
	waitFor(t, 20*time.Second, "leader 3 sees node 2 down", func() bool {
		for _, m := range c.Nodes[2].Node.Members() {
			if m.ID == 2 {
				return !m.Alive
			}
		}
		return false
	})
	r := electctl(t, ep, "transfer", "2")
	if r.code != ExitFailedPrecondition || !strings.Contains(r.stderr, "node 2 is a member but not alive") {
		t.Fatalf("transfer to killed node 2: %+v; want exit 5 saying it is not alive", r)
	}
	r = electctl(t, ep, "kill", "1", "--exit")
	if r.code != ExitOK || !strings.Contains(r.stdout, "node 1 is exiting") || !strings.Contains(r.stdout, "for good") {
		t.Fatalf("kill 1 --exit: %+v", r)
	}
	waitFor(t, 20*time.Second, "node 1's api closes after kill --exit", func() bool { return !dials(c.Nodes[0].APIAddr) })
	r = electctl(t, "--endpoints", c.Nodes[2].APIAddr, "leader")
	if r.code != ExitOK || !strings.Contains(r.stdout, "node-3") {
		t.Fatalf("leader after node 1 ended: %+v", r)
	}

	// A node that knows no leader: a lone node waiting for a second member.
	lone := startDev(t, devcluster.Options{Nodes: 1, BootstrapExpect: 2}, 0)
	r = electctl(t, "--endpoints", lone.Nodes[0].APIAddr, "status")
	rows := columns(r.stdout)
	if r.code != ExitOK || len(rows) != 4 || !strings.Contains(r.stdout, "leader: none known (node is no_leader; no leadership known yet)") ||
		rows[3][5] != "unknown" || rows[3][6] != "unknown" || strings.Contains(r.stdout, " 0.0 ") {
		t.Fatalf("status with no leader known: %+v\nwant the term cells \"unknown\", no 0.0", r)
	}
}

// dials reports whether addr accepts a TCP connection.
func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// With preempt on, resign and transfer that preemption would undo at once
// are refused with exit 5 and the reason, and leadership does not move
// (issue 14: both printed success, exit 0, and the old leader was back
// within 6 ms).
func TestPreemptRefusesWhatItWouldUndo(t *testing.T) {
	c := startDev(t, devcluster.Options{Nodes: 3, Preempt: true}, 3)
	ep := "--endpoints=" + c.Nodes[0].APIAddr
	before := c.Nodes[2].Node.Leader()
	r := electctl(t, ep, "transfer", "2")
	if r.code != ExitFailedPrecondition || !strings.Contains(r.stderr, "transfer refused: preempt is on and node 3") || r.stdout != "" {
		t.Fatalf("transfer 2 with preempt: %+v; want exit 5 and the reason", r)
	}
	r = electctl(t, ep, "resign")
	if r.code != ExitFailedPrecondition || !strings.Contains(r.stderr, "resign refused: preempt is on and node 3 outranks every live member") {
		t.Fatalf("resign with preempt: %+v; want exit 5 and the reason", r)
	}
	if now := c.Nodes[2].Node.Leader(); now.ID != 3 || now.Term != before.Term {
		t.Fatalf("leadership moved: %+v, was %+v", now, before)
	}
}

// Every flag has an ELECTCTL_<FLAG> variable, shown in the help; a flag
// on the command line wins; a bad value names the variable.
func TestEnvironmentVariables(t *testing.T) {
	f := newFixture(t)
	t.Setenv("ELECTCTL_ENDPOINTS", closedAddr(t)+","+f.addr(2))
	t.Setenv("ELECTCTL_OUTPUT", "json")
	r := electctl(t, "leader")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"term_epoch_slot": "1.3"`) {
		t.Fatalf("leader from ELECTCTL_ENDPOINTS, ELECTCTL_OUTPUT=json: %+v", r)
	}
	if r := electctl(t, "-o", "table", "leader"); r.code != ExitOK || !strings.HasPrefix(r.stdout, "ID  NAME") {
		t.Fatalf("-o table over ELECTCTL_OUTPUT=json: %+v", r)
	}
	t.Setenv("ELECTCTL_COUNT", "1")
	if r := electctl(t, "watch"); r.code != ExitOK || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("watch with ELECTCTL_COUNT=1: %+v", r)
	}
	t.Setenv("ELECTCTL_TIMEOUT", "soon")
	if r := electctl(t, "leader"); r.code != ExitUsage || !strings.Contains(r.stderr, "ELECTCTL_TIMEOUT=soon") {
		t.Fatalf("ELECTCTL_TIMEOUT=soon: %+v", r)
	}
	os.Unsetenv("ELECTCTL_TIMEOUT")
	for _, cmd := range []string{"status", "kill", "watch"} {
		help := electctl(t, cmd, "--help").stdout
		root := newRootCmd(&globals{})
		sub, _, _ := root.Find([]string{cmd})
		sub.InheritedFlags().VisitAll(func(fl *pflag.Flag) { checkEnvHelp(t, help, fl.Name) })
		sub.LocalFlags().VisitAll(func(fl *pflag.Flag) { checkEnvHelp(t, help, fl.Name) })
	}
}

func checkEnvHelp(t *testing.T, help, flag string) {
	t.Helper()
	if envSkip(flag) {
		return
	}
	if !strings.Contains(help, "[$"+envName(flag)+"]") {
		t.Errorf("help lacks [$%s] for --%s", envName(flag), flag)
	}
}

// electctl version and --version print the module version and revision
// line (issue 14: there was none).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := electctl(t, args...)
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, "electctl ") || !strings.Contains(r.stdout, "revision") || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("electctl %v: %+v", args, r)
		}
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
