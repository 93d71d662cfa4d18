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
			t.Fatalf("not within 20s: %s (%d elections heard)", what, len(last))
		}
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
