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

// browse opens url in a new headless Chromium.
func browse(t *testing.T, url string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
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

func leaderTerm(c *devcluster.Cluster, i int) election.Term { return c.Nodes[i-1].Node.Leader().Term }

// TestStatusPageInBrowser: a five-node bully cluster with the page open on
// node 2. Before: node 5 leads, everyone alive and agreeing, ring and bully
// orders right. Node 5 is killed: the page shows node 4 leading in a higher
// term (both ways of writing it), node 5 killed and out of the ring, and a
// longer timeline, without a reload. Node 1 is cut off from its peers (its
// gossip and client API still reach): it elects itself, and the page shows
// the disagreement with node 1's row in red, for as long as it lasts.
func TestStatusPageInBrowser(t *testing.T) {
	var net daemontest.Network
	c, err := devcluster.Start(devcluster.Options{Nodes: 5, Algorithm: "bully", Peers: net.Hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	url := "http://" + c.Nodes[1].HealthAddr + "/"
	p := browse(t, url)

	// Before.
	p.waitFor(15*time.Second, "node 5 leading, all five alive and agreeing, live",
		fmt.Sprintf(leaderIs, "5")+" && "+agree+" && "+live+
			` && document.querySelectorAll("#members tbody tr.alive").length === 5`)
	ring := eval[string](p, fmt.Sprintf(order, "#ring li"))
	bully := eval[string](p, fmt.Sprintf(order, "#members tbody tr"))
	if ring != "1,2,3,4,5" || bully != "5,4,3,2,1" {
		t.Fatalf("ring order %q, bully rank %q; want 1,2,3,4,5 and 5,4,3,2,1", ring, bully)
	}
	before := leaderTerm(c, 2)
	if got, tok := p.text("leader-term"), p.text("leader-token"); got != before.String() || tok != strconv.FormatUint(uint64(before), 10) {
		t.Fatalf("the page shows term %q, token %q; node 2 has %v (token %d)", got, tok, before, uint64(before))
	}
	n0 := eval[int](p, timelineN)
	if n0 < 1 {
		t.Fatalf("the timeline shows %d changes after the first election", n0)
	}
	if role := eval[string](p, `document.getElementById("member-5").dataset.role`); role != "leader" {
		t.Fatalf("node 5's role on the page: %q, want leader", role)
	}

	// Kill the leader.
	if err := c.Nodes[4].Node.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.waitFor(15*time.Second, "node 4 leading, node 5 killed and out of the ring, agreement, a longer timeline",
		fmt.Sprintf(leaderIs, "4")+" && "+agree+
			" && "+fmt.Sprintf(memberIs, `["killed", "dead"].includes(m.dataset.liveness)`, 5)+
			` && document.querySelector('#ring li[data-id="5"]').dataset.position === "0"`+
			" && "+fmt.Sprintf(memberIs, `m.dataset.role === "leader"`, 4)+
			" && "+timelineN+" > "+strconv.Itoa(n0))
	after := leaderTerm(c, 2)
	if after <= before {
		t.Fatalf("node 2's term after the failover %v, not above %v", after, before)
	}
	if got, tok := p.text("leader-term"), p.text("leader-token"); got != after.String() || tok != strconv.FormatUint(uint64(after), 10) {
		t.Fatalf("after the failover the page shows term %q, token %q; node 2 has %v (token %d)", got, tok, after, uint64(after))
	}
	ring = eval[string](p, fmt.Sprintf(order, "#ring li"))
	if ring != "1,2,3,4,5" {
		t.Fatalf("ring after the kill %q, want 1,2,3,4 then 5 out of it", ring)
	}

	// Disagreement: cut node 1's peer traffic; it elects itself.
	net.Partition([]election.NodeID{1}, []election.NodeID{2, 3, 4, 5})
	p.waitFor(15*time.Second, "disagreement, node 1 in red naming itself",
		disagree+" && "+fmt.Sprintf(memberIs, `m.dataset.differs === "true" && m.dataset.sees === "1"`, 1)+
			" && "+fmt.Sprintf(memberIs, `m.dataset.differs === "false"`, 2)+
			` && getComputedStyle(document.querySelector("#member-1 td")).color === "rgb(198, 40, 40)"`+
			" && "+fmt.Sprintf(leaderIs, "4"))
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
	p.waitFor(30*time.Second, "agreement again after the cut healed", agree+" && "+fmt.Sprintf(memberIs, `m.dataset.differs === "false"`, 1))
}
