package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/client"
	"github.com/electord/electord/daemon/devcluster"
)

// readUntil reads cs's events until ok holds of the newest of each
// election.
func readUntil(t *testing.T, cs *client.Campaigns, last map[string]client.CampaignEvent, what string, ok func(map[string]client.CampaignEvent) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !ok(last) {
		select {
		case ev, open := <-cs.Events():
			if !open {
				t.Fatalf("events closed before: %s (%v)", what, cs.Err())
			}
			if ev.Election == "" || ev.Election != ev.Leader.Election {
				t.Fatalf("event names no election: %+v", ev)
			}
			last[ev.Election] = ev
		case <-deadline:
			t.Fatalf("not within 20s: %s (%d elections heard; %s)", what, len(last), unlike(last))
		}
	}
}

// unlike names up to three elections whose newest event differs from the
// most common one, so that a failure shows what was wrong.
func unlike(last map[string]client.CampaignEvent) string {
	count := map[string]int{}
	key := func(ev client.CampaignEvent) string { return fmt.Sprintf("%s leader=%d", ev.Event, ev.Leader.ID) }
	for _, ev := range last {
		count[key(ev)]++
	}
	var most string
	for k, n := range count {
		if n > count[most] {
			most = k
		}
	}
	var odd []string
	for name, ev := range last {
		if key(ev) != most && len(odd) < 3 {
			odd = append(odd, fmt.Sprintf("%s: %+v", name, ev))
		}
	}
	return fmt.Sprintf("most %q; others %v", most, odd)
}

// waitSeen waits until c's node knows k elections led by id.
func waitSeen(t *testing.T, c *client.Client, id client.NodeID, k int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := c.ListElectionsPage(context.Background(), client.ElectionsQuery{Leader: id, PageSize: client.ElectionsPageMax})
		if err == nil && p.Matched >= k {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: node sees %d elections led by %d, want %d (%v)", p.Matched, id, k, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allOf(k int, event string, id client.NodeID) func(map[string]client.CampaignEvent) bool {
	return func(last map[string]client.CampaignEvent) bool {
		if len(last) < k {
			return false
		}
		for _, ev := range last {
			if ev.Event != event || ev.Leader.ID != id {
				return false
			}
		}
		return true
	}
}

// CampaignMany holds many candidacies on one stream: it returns with all
// registered, says which it leads with their tokens, and Close ends them
// all, handing each leadership to the other app.
func TestCampaignMany(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Options{Nodes: 2, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dc.Stop)
	a, b := dc.Nodes[0], dc.Nodes[1]
	ca, err := client.New(a.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := client.New(b.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	const k = 100
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("part-%d", i)
	}
	ctx := context.Background()
	sa, err := ca.CampaignMany(ctx, names, "app-a", client.WithPriority(1), client.WithPlacement("sticky"))
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	aID, bID := client.NodeID(a.Node.Self()), client.NodeID(b.Node.Self())
	lastA := map[string]client.CampaignEvent{}
	readUntil(t, sa, lastA, "a leads all", allOf(k, "leader", aID))
	if got := len(sa.Leaderships()); got != k {
		t.Fatalf("Leaderships lists %d, want %d", got, k)
	}
	if li, ok := sa.Leading("part-7"); !ok || li.Term == 0 || li.Election != "part-7" {
		t.Fatalf("Leading(part-7) = %+v, %v", li, ok)
	}
	// b campaigns where a visibly leads: until b's node has heard a's
	// candidacies, b would be the only candidate it knows and lead too, and
	// plain mode settles two such leaderships by support, then term, not by
	// who came first.
	waitSeen(t, cb, aID, k)
	sb, err := cb.CampaignMany(ctx, names, "app-b")
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	lastB := map[string]client.CampaignEvent{}
	readUntil(t, sb, lastB, "b follows a everywhere", allOf(k, "follower", aID))
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := sa.Leading("part-7"); ok {
		t.Fatal("a closed set still leads")
	}
	readUntil(t, sb, lastB, "b leads all after a's Close", allOf(k, "leader", bID))
	for name, ev := range lastB {
		if ev.Leader.Term <= lastA[name].Leader.Term {
			t.Fatalf("%s: b's token %d is not above a's %d", name, ev.Leader.Term, lastA[name].Leader.Term)
		}
	}

	// A bad list fails at once, naming the offender.
	names[5] = "part-2"
	_, err = ca.CampaignMany(ctx, names, "app-a")
	if grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `elections[5] "part-2"`) {
		t.Fatalf("duplicate: %v", err)
	}
}
