package integration

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/client"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
)

// Exit codes of electctl (cmd/electctl/exit.go).
const (
	exitOK                 = 0
	exitUnavailable        = 3
	exitNotFound           = 4
	exitFailedPrecondition = 5
)

// TestElectctlKillRevive drives a real cluster with the electctl binary:
// kill the leader, revive it, kill an unknown id, and talk to a closed port.
func TestElectctlKillRevive(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		eps := strings.Join(apiAddrs(c.Nodes), ",")

		// leader -o json: the cluster's leader.
		r := electctl(t, "--endpoints", eps, "-o", "json", "leader")
		if r.code != exitOK {
			t.Fatalf("electctl leader: %v", r)
		}
		var li client.LeaderInfo
		// The same leader, in the first agreement's term or a later one (a
		// bully leader announces itself again when a campaign crossed it).
		if err := json.Unmarshal([]byte(r.stdout), &li); err != nil || li.ID != l0.ID || li.Term < l0.Term {
			t.Fatalf("electctl -o json leader = %+v (%v), want node %d in term %v or later\n%v", li, err, l0.ID, l0.Term, r)
		}

		// kill <leader>: the others elect a new leader in a higher term.
		killed := l0.ID
		r = electctl(t, "--endpoints", eps, "kill", u(killed))
		if r.code != exitOK || !strings.Contains(r.stdout, "killed") {
			t.Fatalf("electctl kill %d: %v", killed, r)
		}
		if !nodeByID(t, c, killed).Node.Status().Killed {
			t.Fatalf("node %d is not killed after electctl kill", killed)
		}
		survivors := without(c.Nodes, killed)
		l1 := waitNewAgreement(t, survivors, l0, 5*time.Second, "the survivors elect a new leader after electctl kill")
		t.Logf("killed node %d (term %v): node %d leads in term %v", killed, l0.Term, l1.ID, l1.Term)

		// revive: the node comes back and follows the sitting leader.
		r = electctl(t, "--endpoints", eps, "revive", u(killed))
		if r.code != exitOK || !strings.Contains(r.stdout, "revived") {
			t.Fatalf("electctl revive %d: %v", killed, r)
		}
		l2 := waitAgreement(t, c.Nodes, 5*time.Second, "all nodes agree after electctl revive")
		if l2.ID != l1.ID || l2.Term != l1.Term {
			t.Fatalf("after reviving node %d the cluster agrees on node %d in term %v; want the sitting leader %d in term %v (leadership is sticky)",
				killed, l2.ID, l2.Term, l1.ID, l1.Term)
		}
		if st := nodeByID(t, c, killed).Node.Status(); st.Killed || st.Term < l0.Term {
			t.Fatalf("revived node %d: killed=%v, highest term %v (was leader in %v)", killed, st.Killed, st.Term, l0.Term)
		}

		// kill of an id that is not a member: NotFound, exit 4.
		r = electctl(t, "--endpoints", eps, "kill", "99")
		if r.code != exitNotFound || !strings.Contains(r.stderr, "99") {
			t.Fatalf("electctl kill 99: want exit %d naming node 99, got %v", exitNotFound, r)
		}
		if got, ok := agreement(c.Nodes); !ok || got.ID != l1.ID || got.Term != l1.Term {
			t.Fatalf("electctl kill 99 changed the cluster: %s", describeViews(c.Nodes))
		}

		// A closed port: unavailable, exit 3, one line on stderr.
		closed := closedAddr(t)
		for _, args := range [][]string{{"leader"}, {"kill", "1"}, {"status"}} {
			r = electctl(t, append([]string{"--endpoints", closed, "--timeout", "3s"}, args...)...)
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code != exitUnavailable || len(lines) != 1 || !strings.HasPrefix(lines[0], "electctl: ") || r.stdout != "" {
				t.Errorf("electctl %s against closed %s: want exit %d and one line on stderr, got %v", strings.Join(args, " "), closed, exitUnavailable, r)
			}
		}
	})
}

// TestElectctlResignTransfer: electctl resign gives a different leader in a
// higher term; electctl transfer 2 makes node 2 lead in a higher term.
// Both are sent to a follower's endpoint, which forwards them.
func TestElectctlResignTransfer(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		follower := without(c.Nodes, l0.ID, 2)[0]

		r := electctl(t, "--endpoints", follower.APIAddr, "resign")
		if r.code != exitOK || !strings.Contains(r.stdout, "resigned") {
			t.Fatalf("electctl resign: %v", r)
		}
		var l1 = l0
		eventually(t, 5*time.Second, "a different leader in a higher term after resign", func() (bool, string) {
			li, ok := agreement(c.Nodes)
			l1 = li
			return ok && li.ID != l0.ID && li.Term > l0.Term, describeViews(c.Nodes)
		})
		t.Logf("resign: node %d (term %v) -> node %d (term %v)", l0.ID, l0.Term, l1.ID, l1.Term)

		target := election.NodeID(2)
		r = electctl(t, "--endpoints", follower.APIAddr, "transfer", u(target))
		if r.code != exitOK {
			t.Fatalf("electctl transfer %d: %v", target, r)
		}
		var l2 = l1
		eventually(t, 5*time.Second, "node 2 leads in a higher term after transfer", func() (bool, string) {
			li, ok := agreement(c.Nodes)
			l2 = li
			return ok && li.ID == target && li.Term > l1.Term, describeViews(c.Nodes)
		})
		t.Logf("transfer: node %d (term %v) -> node %d (term %v)", l1.ID, l1.Term, l2.ID, l2.Term)

		// Transfer to an unknown id: NotFound, exit 4, nothing changes.
		r = electctl(t, "--endpoints", follower.APIAddr, "transfer", "99")
		if r.code != exitNotFound {
			t.Fatalf("electctl transfer 99: want exit %d, got %v", exitNotFound, r)
		}
		if li, ok := agreement(c.Nodes); !ok || li.ID != l2.ID || li.Term != l2.Term {
			t.Fatalf("electctl transfer 99 changed the cluster: %s", describeViews(c.Nodes))
		}
	})
}

func u(id election.NodeID) string { return strconv.FormatUint(uint64(id), 10) }
