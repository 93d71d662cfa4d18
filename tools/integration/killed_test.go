package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/electord/electord/client"
	"github.com/electord/electord/daemon/devcluster"
)

// TestKilledNodeAPIUnavailable: after `electctl kill N` (no --exit), node N's
// client API answers like a crashed node's, so `electctl --endpoints
// killed,live leader` and the client library get the live node's leader
// (issue 10: exit 5 "no leader known", the live endpoint never tried), and
// `electctl revive N` through N's own endpoint still works.
func TestKilledNodeAPIUnavailable(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 3, Algorithm: alg})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		killed, live := nodeByID(t, c, 1), nodeByID(t, c, 2)
		if r := electctl(t, "--endpoints", killed.APIAddr, "kill", "1"); r.code != exitOK {
			t.Fatalf("electctl kill 1: %v", r)
		}
		eps := killed.APIAddr + "," + live.APIAddr
		l1 := waitAgreement(t, without(c.Nodes, 1), 10*time.Second, "nodes 2 and 3 agree with node 1 killed")
		r := electctl(t, "--endpoints", eps, "-o", "json", "leader")
		var li client.LeaderInfo
		// The live node's view: a leader other than node 1 (node 2 or 3, as
		// the survivors agreed, or a later one should they have moved on).
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &li) != nil || li.ID == 1 || !li.HasLeader() || li.Term < l1.Term {
			t.Fatalf("electctl --endpoints killed,live leader: %v; want the survivors' leader (node %d in term %v or later)", r, l1.ID, l1.Term)
		}
		got, err := newClient(t, killed.APIAddr, live.APIAddr).Leader(ctxTimeout(t, 5*time.Second))
		if err != nil || got.ID == 1 || !got.HasLeader() || got.Term < l1.Term {
			t.Fatalf("client Leader with [killed, live]: %+v, %v; want the survivors' leader (node %d in term %v or later)", got, err, l1.ID, l1.Term)
		}
		if r := electctl(t, "--endpoints", killed.APIAddr, "revive", "1"); r.code != exitOK {
			t.Fatalf("electctl revive 1 through node 1: %v", r)
		}
		l2 := waitAgreement(t, c.Nodes, 10*time.Second, "all agree after the revive")
		if l2.Term < l0.Term {
			t.Fatalf("term went back: %v after %v", l2.Term, l0.Term)
		}
	})
}
