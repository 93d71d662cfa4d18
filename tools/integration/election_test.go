package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/client"
	"github.com/electord/electord/daemon/devcluster"
)

// TestFirstElection: five in-process nodes on real gRPC and gossip agree on
// node 5, and every node's api endpoint says so, with the same term.
func TestFirstElection(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		start := time.Now()
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg})
		li := waitAgreement(t, c.Nodes, 10*time.Second, "5 nodes agree on a leader")
		t.Logf("agreed on node %d, term %v, %v after start", li.ID, li.Term, time.Since(start).Round(time.Millisecond))
		if li.ID != 5 {
			t.Fatalf("the cluster agreed on node %d (term %v), want node 5", li.ID, li.Term)
		}

		// Every endpoint, through the client library.
		clients := make([]*client.Client, len(c.Nodes))
		for i, d := range c.Nodes {
			clients[i] = newClient(t, d.APIAddr)
		}
		// The term may have moved on since the first agreement: a lower node
		// whose campaign crossed node 5's announcement makes node 5 announce
		// itself again at a new term (bully). One term everywhere, and never
		// below the first, is what is asked.
		first := li.Term
		eventually(t, 5*time.Second, "every api endpoint reports node 5 in one term", func() (bool, string) {
			var views []string
			ok := true
			li.Term = 0
			for i, d := range c.Nodes {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				got, err := clients[i].Leader(ctx)
				if err != nil {
					cancel()
					return false, fmt.Sprintf("%s: %v", d.APIAddr, err)
				}
				views = append(views, fmt.Sprintf("%d:%d@%v", d.Config.ID, got.ID, got.Term))
				isSelf, err := clients[i].IsLeader(ctx)
				cancel()
				if err != nil {
					return false, fmt.Sprintf("%s: IsLeader: %v", d.APIAddr, err)
				}
				wantSelf := d.Config.ID == 5
				if li.Term == 0 {
					li.Term = got.Term
				}
				if got.ID != 5 || got.Term != li.Term || got.Term < first || got.Self != wantSelf || isSelf != wantSelf ||
					got.Name != "node-5" || got.Address != nodeByID(t, c, 5).APIAddr {
					ok = false
				}
			}
			return ok, strings.Join(views, " ")
		})

		// And one client over all endpoints.
		cl := newClient(t, apiAddrs(c.Nodes)...)
		got, err := cl.Leader(ctxTimeout(t, 3*time.Second))
		if err != nil || got.ID != 5 || got.Term != li.Term {
			t.Fatalf("Leader over all endpoints: %+v, %v; want node 5 in term %v", got, err, li.Term)
		}
	})
}
