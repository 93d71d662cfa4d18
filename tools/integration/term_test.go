package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// TestRestartedNodeReportsPersistedTerm: a node restarted from its data dir
// that has no leader yet reports its persisted term (the last leadership it
// knew), not 0, in every
// no-leader answer: the sidecar's 503 JSON, gRPC GetLeader and the first
// WatchLeader event (through the client library), and electctl leader
// (issues 10 and 11). Quorum 2 with one node keeps it leaderless.
func TestRestartedNodeReportsPersistedTerm(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		cfg := devConfig(1, alg, t.TempDir(), nil)
		cfg.PeerServer = peerServerOf(t)
		cfg.Quorum = 2
		store, err := node.OpenTermStore(cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		// It followed node 3 at 58.3 before, and had seen term 60.2.
		if err := store.Save(election.Term(60<<election.SlotBits|2), election.Term(58<<election.SlotBits|3)); err != nil {
			t.Fatal(err)
		}
		saved, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		persisted := saved.LeaderTerm // the term a node reports is a leadership's
		d, err := daemon.Start(cfg, daemon.Options{Logger: testLogger("node-1")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Stop() })
		time.Sleep(3 * cfg.HeartbeatTimeout) // it campaigns and finds no quorum

		code, body := httpGet(t, "http://"+d.HTTPAddr+"/leader")
		var nl struct {
			State string        `json:"state"`
			Term  election.Term `json:"term"`
		}
		if err := json.Unmarshal(body, &nl); err != nil || code != http.StatusServiceUnavailable || nl.State != node.StateNoLeader || nl.Term < persisted {
			t.Errorf("GET /leader: %d %s; want 503 no_leader with a term of at least the persisted %v", code, body, persisted)
		}

		c := newClient(t, d.APIAddr)
		li, err := c.Leader(ctxTimeout(t, 5*time.Second))
		if err != nil || li.HasLeader() || li.Term < persisted {
			t.Errorf("GetLeader: %+v, %v; want no leader with a term of at least %v", li, err, persisted)
		}
		ev := <-c.Watch(ctxTimeout(t, 5*time.Second))
		if ev.Err != nil || ev.Leader.HasLeader() || ev.Leader.Term < persisted {
			t.Errorf("first WatchLeader event: %+v; want no leader with a term of at least %v", ev, persisted)
		}

		r := electctl(t, "--endpoints", d.APIAddr, "leader")
		var epoch, slot uint64
		_, err = fmt.Sscanf(r.stderr[strings.Index(r.stderr, "leadership term ")+len("leadership "):], "term %d.%d ", &epoch, &slot)
		if r.code == exitOK || err != nil || election.Term(epoch<<election.SlotBits|slot) < persisted {
			t.Errorf("electctl leader: %v; want no leader known, with a term of at least %v", r, persisted)
		}
	})
}
