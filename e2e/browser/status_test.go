// Package browser tests the status page (package status) in a real
// headless Chromium driven over the DevTools protocol (chromedp), against a
// real dev cluster. It is a test-only module so that chromedp stays out of
// the product's go.mod.
package browser

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/electord/electord/daemon/daemontest"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the screenshot to docs/status.png (the README's picture)")

// page is one browser tab on a status page.
type page struct {
	t   *testing.T
	ctx context.Context
}

// browse opens url in a new headless Chromium (the binary at bin).
func browse(t *testing.T, bin, url string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 1040),
		chromedp.Flag("hide-scrollbars", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx}
	// The first Run starts the browser, which lives as long as that call's
	// context: no deadline on this one (the test's timeout bounds it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	p.do(30*time.Second, "open "+url, chromedp.Navigate(url))
	return p
}

// do runs actions within d.
func (p *page) do(d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval returns a JavaScript expression's value now.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits, at most d, until the page shows what expr checks (a
// JavaScript expression that is true then), checking on every change of
// the page; on the deadline it fails with what the page showed.
func (p *page) waitFor(d time.Duration, what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, d)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(d)))
	if err != nil {
		p.t.Fatalf("the page did not show %s within %v (%v); it showed:\n%s", what, d, err,
			eval[string](p, `document.getElementById("view").innerText`))
	}
}

func (p *page) text(id string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`document.getElementById(%q).innerText.trim()`, id))
}

// screenshot saves the viewport as a PNG.
func (p *page) screenshot(path string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// Page state, as JavaScript expressions.
const (
	leaderIs  = `document.getElementById("leader").dataset.leader === %q`
	memberIs  = `(m => m !== null && %s)(document.getElementById("member-%d"))`
	order     = `Array.from(document.querySelectorAll(%q)).map(e => e.dataset.id).join(",")`
	timelineN = `+document.getElementById("timeline").dataset.count`
	live      = `document.getElementById("conn").dataset.state === "live"`
	disagree  = `document.getElementById("agreement").dataset.disagree === "true"`
	agree     = `document.getElementById("agreement").dataset.disagree === "false"`
)

func leaderTerm(c *devcluster.Cluster, i election.NodeID) election.Term {
	return c.Nodes[i-1].Node.Leader().Term
}

// agreed waits until every live node names the same leader, other than
// not, and returns it. Which node that is depends on who joined gossip
// first (a leader stays without preempt): the test follows the cluster, it
// does not guess.
func agreed(t *testing.T, c *devcluster.Cluster, not election.NodeID) election.NodeID {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var first election.NodeID
		ok := true
		for _, d := range c.Nodes {
			if d.Node.Status().Killed {
				continue
			}
			li := d.Node.Leader()
			if !li.HasLeader() || (first != 0 && li.ID != first) {
				ok = false
				break
			}
			first = li.ID
		}
		if ok && first != 0 && first != not {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live nodes did not agree on a leader (other than %d) within 15s", not)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

func id(n election.NodeID) string { return strconv.FormatUint(uint64(n), 10) }

// TestStatusPageInBrowser: a five-node bully cluster with the page open on
// a follower (node 2 unless it leads). Before: the leader the nodes agree on is shown, everyone alive
// and agreeing, ring and bully orders right. The leader is killed: the page
// shows the new leader in a higher term (both ways of writing it), the
// killed node dead or killed and out of the ring, and a longer timeline,
// without a reload. Another follower is cut off from its peers (its gossip
// and client API still reach): it elects itself, and the page shows the
// disagreement with that node's row in red, for as long as it lasts.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t) // first: installing it may take minutes
	var net daemontest.Network
	c, err := devcluster.Start(devcluster.Options{Nodes: 5, Algorithm: "bully", Peers: net.Hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	old := agreed(t, c, 0)
	viewer := election.NodeID(2) // the node serving the page: a follower
	if viewer == old {
		viewer = 3
	}
	url := "http://" + c.Nodes[viewer-1].HealthAddr + "/"
	p := browse(t, bin, url)

	// Before.
	p.waitFor(15*time.Second, "a leader, all five alive and agreeing, live",
		`document.getElementById("leader").dataset.leader !== "0" && `+agree+" && "+live+
			` && document.querySelectorAll("#members tbody tr.alive").length === 5`)
	// On a loaded host a starved node can time out and leadership move
	// after the first election: check what the cluster agrees on now.
	if old = agreed(t, c, 0); old == viewer {
		t.Fatalf("leadership moved to node %d, whose page the test reads (a heavily loaded host)", old)
	}
	p.waitFor(15*time.Second, "node "+id(old)+" leading", fmt.Sprintf(leaderIs, id(old))+" && "+agree)
	ring := eval[string](p, fmt.Sprintf(order, "#ring li"))
	bully := eval[string](p, fmt.Sprintf(order, "#members tbody tr"))
	if ring != "1,2,3,4,5" || bully != "5,4,3,2,1" {
		t.Fatalf("ring order %q, bully rank %q; want 1,2,3,4,5 and 5,4,3,2,1", ring, bully)
	}
	before := leaderTerm(c, viewer)
	if got, tok := p.text("leader-term"), p.text("leader-token"); got != before.String() || tok != strconv.FormatUint(uint64(before), 10) {
		t.Fatalf("the page shows term %q, token %q; node %d has %v (token %d)", got, tok, viewer, before, uint64(before))
	}
	// Nothing comes from elsewhere: every resource the page loaded (its
	// script, style sheet and event stream) is the node's own.
	if foreign := eval[[]string](p, `performance.getEntriesByType("resource").map(e => e.name).filter(n => !n.startsWith(location.origin + "/status/") && !n.startsWith("data:"))`); len(foreign) > 0 {
		t.Fatalf("the page loaded resources from elsewhere: %v", foreign)
	}
	if n := eval[int](p, `performance.getEntriesByType("resource").length`); n < 2 {
		t.Fatalf("the page loaded %d resources; want its script and style sheet at least", n)
	}
	n0 := eval[int](p, timelineN)
	if n0 < 1 {
		t.Fatalf("the timeline shows %d changes after the first election", n0)
	}
	if role := eval[string](p, fmt.Sprintf(`document.getElementById("member-%d").dataset.role`, old)); role != "leader" {
		t.Fatalf("node %d's role on the page: %q, want leader", old, role)
	}

	// Kill the leader.
	if err := c.Nodes[old-1].Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.waitFor(15*time.Second, "another leader, node "+id(old)+" killed and out of the ring, agreement, a longer timeline",
		fmt.Sprintf(`(l => l !== "0" && l !== %q)(document.getElementById("leader").dataset.leader)`, id(old))+" && "+agree+
			" && "+fmt.Sprintf(memberIs, `["killed", "dead"].includes(m.dataset.liveness)`, old)+
			fmt.Sprintf(` && document.querySelector('#ring li[data-id="%d"]').dataset.position === "0"`, old)+
			" && "+timelineN+" > "+strconv.Itoa(n0))
	shown, err := strconv.ParseUint(eval[string](p, `document.getElementById("leader").dataset.leader`), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	leader := election.NodeID(shown)
	p.waitFor(15*time.Second, "node "+id(leader)+" as the leader in the members", fmt.Sprintf(memberIs, `m.dataset.role === "leader"`, leader))
	if now := agreed(t, c, old); now != leader {
		t.Logf("the page shows node %d leading, the cluster now agrees on node %d", leader, now)
	}
	term, tok := p.text("leader-term"), p.text("leader-token")
	if after, err := strconv.ParseUint(tok, 10, 64); err != nil || election.Term(after) <= before || election.Term(after).String() != term {
		t.Fatalf("after the failover the page shows term %q, token %q; before it was %v (token %d)", term, tok, before, uint64(before))
	}
	var inRing []string
	for i := election.NodeID(1); i <= 5; i++ {
		if i != old {
			inRing = append(inRing, id(i))
		}
	}
	ring = eval[string](p, fmt.Sprintf(order, "#ring li"))
	if want := strings.Join(inRing, ",") + "," + id(old); ring != want {
		t.Fatalf("ring after the kill %q, want %s", ring, want)
	}

	// Disagreement: cut a follower's peer traffic (not the viewer's); it
	// elects itself while the other three keep the leader.
	var cut election.NodeID
	for i := election.NodeID(1); i <= 5 && cut == 0; i++ {
		if i != old && i != leader && i != viewer {
			cut = i
		}
	}
	var rest []election.NodeID
	for i := election.NodeID(1); i <= 5; i++ {
		if i != cut {
			rest = append(rest, i)
		}
	}
	net.Partition([]election.NodeID{cut}, rest)
	p.waitFor(15*time.Second, "disagreement, node "+id(cut)+" in red naming itself",
		disagree+" && "+fmt.Sprintf(memberIs, `m.dataset.differs === "true" && m.dataset.sees === "`+id(cut)+`"`, cut)+
			" && "+fmt.Sprintf(memberIs, `m.dataset.differs === "false"`, viewer)+
			fmt.Sprintf(` && getComputedStyle(document.querySelector("#member-%d td")).color === "rgb(198, 40, 40)"`, cut)+
			" && "+fmt.Sprintf(leaderIs, id(leader)))
	shot := filepath.Join(t.TempDir(), "status.png")
	p.screenshot(shot)
	t.Logf("screenshot: %s", shot)
	if *updateScreenshot {
		png, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/status.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote ../../docs/status.png")
	}

	// It lasts as long as the cut: heal, and the red goes.
	net.Heal()
	p.waitFor(30*time.Second, "agreement again after the cut healed", agree+" && "+fmt.Sprintf(memberIs, `m.dataset.differs === "false"`, cut))
}
