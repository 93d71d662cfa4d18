package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/client"
	"github.com/electord/electord/config"
	pb "github.com/electord/electord/proto/electord/v1"
)

// Issue 12, "What it must show": whole clusters of real electord processes
// with mutual TLS on every port and a gossip key, for both algorithms and
// both peer servers; certificate and gossip key rotation while a leader
// holds; a certificate for the wrong id; and the issue's attacks against a
// secure cluster and an --insecure one.

// fewTimeouts is how long "nothing moved" is watched for after each change
// that must not move the leadership: three default heartbeat timeouts. The
// watch itself runs from before the first change to the end of the test,
// which spans many of the clusters' heartbeat timeouts.
const fewTimeouts = 3 * config.DefaultHeartbeatTimeout

// secureTiming are flags every node of these clusters runs with: a leader
// timeout of 4 s instead of 600 ms, and memberlist's LAN timings (the
// default preset; 500 ms probe timeout, 4 s suspicion) instead of the
// tests' usual "local" ones. These tests judge that nothing moves while
// certificates and keys rotate and attacks are refused; on a busy machine
// (CI, or benchmarks alongside) a process can be descheduled for more than
// a second, and its peers then rightly suspect it, which says nothing
// about security. A rotation that broke the peer links or gossip would
// still be seen: heartbeats go on every 200 ms and gossip probes every
// second, and the watched window spans many timeouts.
var secureTiming = []string{"--heartbeat-timeout", "4s", "--gossip-preset", "lan"}

// TestSecureCluster: for each algorithm and peer server, three processes
// with certificates from `electord certs` and a gossip key file each:
//
//   - they elect one leader every node agrees on (read over the API with a
//     reader certificate), every node lists every other alive, and the API
//     and peer ports serve the node's certificate;
//   - certificate rotation: every node's certificate and key are reissued
//     on disk (same CA); each node reloads them (logged), new connections to
//     its API and peer ports get the new certificate, and the leader and
//     its term do not move;
//   - a certificate for the wrong id put in a running node's files is not
//     loaded (logged, naming both ids), and the node keeps serving its own;
//   - gossip key rotation, install / use / remove on every node's key file:
//     each node reloads its keys, membership stays complete, the leader and
//     term do not move;
//   - a node started with node 2's certificate as --id 4 is refused (exit 2,
//     naming both ids) and never becomes a member.
//
// The leadership is watched on every node's WatchLeader stream from before
// the first rotation to the end: any other leader or term fails the test.
func TestSecureCluster(t *testing.T) {
	// Two clusters at a time, one per algorithm, as forEachAlgorithm runs
	// them: the rotation phases judge that nothing moves, and secureTiming
	// lets a node be descheduled for seconds without a suspicion.
	forEachAlgorithm(t, testSecureCluster)
}

func testSecureCluster(t *testing.T, alg string) {
	k := newPKI(t, 1, 2, 3)
	key := newGossipKey(t)
	ps := startSecureProcs(t, k, 3, alg, key, secureTiming...)
	l0 := waitProcAgreement(t, ps, 30*time.Second, "three secure processes agree on a leader", nil)
	eventually(t, 10*time.Second, "every node lists every node alive", func() (bool, string) { return membersComplete(ps) })
	for _, p := range ps {
		if countIn(p, "electord started", "tls=true", "gossip-encrypted=true") == 0 {
			t.Fatalf("node %d did not start with tls=true gossip-encrypted=true", p.id)
		}
	}
	t.Logf("secure %s cluster (peer server %s): node %d leads at %v", alg, peerServerOf(t), l0.ID, l0.Term)

	pool := k.pool(t)
	reader := k.pair(t, k.clientCert("web"), k.clientKey("web"))
	serials := func(p *proc, as int) (api, peer string) {
		a, err := k.apiSerial(p.api, pool, reader)
		if err != nil {
			return "api: " + err.Error(), ""
		}
		pr, err := k.peerSerial(p.peer, p.id, pool, k.pair(t, k.nodeCert(as), k.nodeKey(as)))
		if err != nil {
			return a.String(), "peer: " + err.Error()
		}
		return a.String(), pr.String()
	}
	for _, p := range ps {
		want := serialOf(t, k.nodeCert(p.id)).String()
		eventually(t, 10*time.Second, fmt.Sprintf("node %d serves its certificate on the api and peer ports", p.id), func() (bool, string) {
			a, pr := serials(p, 1+p.id%3)
			return a == want && pr == want, fmt.Sprintf("api %s, peer %s, want %s", a, pr, want)
		})
	}

	w := watchLeaders(t, ps)

	// ---- certificate rotation while the leader holds ----
	old := map[int]string{}
	for _, p := range ps {
		old[p.id] = serialOf(t, k.nodeCert(p.id)).String()
		k.issueNode(t, p.id)
	}
	for _, p := range ps {
		waitLog(t, p, 15*time.Second, 1, "tls: certificates reloaded")
	}
	for _, p := range ps {
		want := serialOf(t, k.nodeCert(p.id)).String()
		if want == old[p.id] {
			t.Fatalf("node %d: the reissued certificate has the old serial %s", p.id, want)
		}
		eventually(t, 5*time.Second, fmt.Sprintf("node %d serves its new certificate on new connections", p.id), func() (bool, string) {
			a, pr := serials(p, 1+p.id%3)
			return a == want && pr == want, fmt.Sprintf("api %s, peer %s, want %s (old %s)", a, pr, want, old[p.id])
		})
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after the certificate rotation")
	t.Logf("certificates rotated on every node; node %d still leads at %v", l0.ID, l0.Term)

	// ---- a certificate for the wrong id, in a running node's files ----
	victim := ps[2]
	rotated := serialOf(t, k.nodeCert(victim.id)).String()
	for _, f := range []struct{ from, to string }{{k.nodeKey(2), k.nodeKey(victim.id)}, {k.nodeCert(2), k.nodeCert(victim.id)}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		writeFileAtomic(t, f.to, b)
	}
	waitLog(t, victim, 15*time.Second, 1, "tls: reloading certificates failed", "names node 2",
		fmt.Sprintf("this node's id is %d", victim.id))
	if a, pr := serials(victim, 1); a != rotated || pr != rotated {
		t.Fatalf("node %d, given node 2's certificate, serves api %s, peer %s; want its own %s", victim.id, a, pr, rotated)
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after node 2's certificate was put in node 3's files")

	// ---- gossip key rotation: install, use, remove ----
	newKey := newGossipKey(t)
	dir := strings.TrimSuffix(ps[0].logPath, "node-1.stderr")
	for step, s := range []struct {
		name, content, keys string
	}{
		{"install", key + "\n" + newKey + "\n", "keys=2"},
		{"use", newKey + "\n" + key + "\n", "keys=2"},
		{"remove", newKey + "\n", "keys=1"},
	} {
		for _, p := range ps {
			writeFileAtomic(t, gossipKeyFile(dir, p.id), []byte(s.content))
		}
		for _, p := range ps {
			waitLog(t, p, 15*time.Second, step+1, "gossip keys reloaded")
			if countIn(p, "gossip keys reloaded", s.keys) == 0 {
				t.Fatalf("gossip key %s: node %d did not log %s", s.name, p.id, s.keys)
			}
		}
		eventually(t, 10*time.Second, "every node lists every node alive after gossip key "+s.name, func() (bool, string) {
			return membersComplete(ps)
		})
		holdsFor(t, ps, w, l0, fewTimeouts, "after gossip key "+s.name)
	}
	// Gossip now runs on the new key alone: a failure to decrypt would have
	// suspected and then declared members dead within a few probe
	// intervals (1 s in the local preset).
	holdsFor(t, ps, w, l0, 3*time.Second, "on the new gossip key alone")
	if ok, desc := membersComplete(ps); !ok {
		t.Fatalf("membership on the new gossip key alone: %s", desc)
	}
	t.Logf("gossip key rotated on every node; membership complete, node %d still leads at %v", l0.ID, l0.Term)

	// The old key is out of the ring: a node gossiping with it alone (and
	// the cluster's label) is refused.
	oldKeyFile := gossipKeyFile(dir, 9)
	if err := os.WriteFile(oldKeyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := newProc(t, t.TempDir(), 9, alg)
	stale.join = []string{ps[0].gossip}
	stale.extra = []string{"--gossip-key-file", oldKeyFile, "--gossip-label", secureClusterName}
	cleanupProcs(t, []*proc{stale})
	stale.start()
	waitLog(t, ps[0], 10*time.Second, 1, "level=ERROR", "component=memberlist", "decrypt")
	holdsFor(t, ps, w, l0, fewTimeouts, "while a node with the removed gossip key tries to join")
	for _, p := range ps {
		ms, err := p.cl.Members(ctxTimeout(t, 2*time.Second))
		if err != nil {
			t.Fatalf("members of node %d: %v", p.id, err)
		}
		for _, m := range ms {
			if m.ID == 9 {
				t.Fatalf("node %d lists node 9, which has only the removed gossip key: %+v", p.id, m)
			}
		}
	}
	stale.stop()

	// ---- a node with a certificate for the wrong id ----
	api4 := closedAddr(t)
	code, out := runElectord(t, "--id", "4", "--algorithm", alg, "--peer-server", peerServerOf(t),
		"--api-addr", api4, "--peer-addr", closedAddr(t), "--gossip-addr", closedAddr(t), "--http-addr", closedAddr(t),
		"--gossip-preset", "local", "--join", ps[0].gossip,
		"--tls-ca", k.ca(), "--tls-cert", k.nodeCert(2), "--tls-key", k.nodeKey(2),
		"--gossip-key-file", gossipKeyFile(dir, 1))
	if code != 2 || !strings.Contains(out, "names node 2") || !strings.Contains(out, "this node's id is 4") {
		t.Fatalf("electord --id 4 with node 2's certificate: exit %d, want 2 naming both ids:\n%s", code, out)
	}
	for _, p := range ps {
		ms, err := p.cl.Members(ctxTimeout(t, 2*time.Second))
		if err != nil {
			t.Fatalf("members of node %d: %v", p.id, err)
		}
		for _, m := range ms {
			if m.ID == 4 {
				t.Fatalf("node %d lists node 4: %+v", p.id, m)
			}
		}
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after the node with the wrong certificate")
}

// TestSecureClusterAttacks: the attacks of issue 12 against a 3-node bully
// cluster with mTLS and a gossip key, with either peer server. Each is
// refused; where the product logs the refusal, its reason is in the log;
// the leader and its term never move (every node's WatchLeader stream is
// watched throughout).
//
//   - forged Coordinator (the leader at a fresh epoch; a non-member, 999)
//     and forged TimeoutNow (claiming to come from the leader) from an
//     outsider: in plaintext, over TLS without a certificate, and with a
//     client (reader) certificate: the peer port's handshake refuses all
//     (Unavailable);
//   - the same forgeries from a member's certificate (a compromised
//     follower) speaking for the leader: PermissionDenied, naming the
//     certificate's node;
//   - a member's certificate speaking as itself: a Coordinator naming
//     non-member 999 and a TimeoutNow from a node that does not lead are
//     refused by the membership checks, and logged with the reason;
//   - the unauthenticated `electctl kill 3 --exit`, sent to node 1: refused
//     without a certificate, and with a reader one (exit 7, logged with the
//     caller's identity); node 3's process keeps running;
//   - a node without the gossip key (with the cluster's gossip label) that
//     joins node 1's gossip is never listed; node 1 logs memberlist's
//     refusal of its unencrypted state;
//   - every refused handshake above is logged, `tls: handshake refused`
//     with its listener and reason: on the followers' peer ports not_tls,
//     no_certificate and wrong_identity (a reader's or admin's
//     certificate), on node 1's API not_tls and no_certificate.
//
// Not asserted, because the product does not do it yet: the peer port logs
// no PermissionDenied of a From that is not the certificate's node.
func TestSecureClusterAttacks(t *testing.T) {
	// Two clusters at a time (see TestSecureCluster).
	for _, ps := range peerServers {
		t.Run(ps, func(t *testing.T) {
			t.Parallel()
			testSecureAttacks(t)
		})
	}
}

func testSecureAttacks(t *testing.T) {
	k := newPKI(t, 1, 2, 3)
	ps := startSecureProcs(t, k, 3, "bully", newGossipKey(t), secureTiming...)
	l0 := waitProcAgreement(t, ps, 30*time.Second, "three secure processes agree on a leader", nil)
	eventually(t, 10*time.Second, "every node lists every node alive", func() (bool, string) { return membersComplete(ps) })
	w := watchLeaders(t, ps)
	leader := procByID(ps, l0.ID)
	var followers []*proc
	for _, p := range ps {
		if p != leader {
			followers = append(followers, p)
		}
	}
	f1, f2 := followers[0], followers[1]
	L := uint64(l0.ID)
	fresh := termOf(l0.Term.Epoch()+1, int(L))
	ctx := ctxTimeout(t, time.Minute)
	call := func(pc pb.PeerClient, m any) error { return sendPeer(ctx, pc, m) }
	forgeries := func(to *proc) []any {
		return []any{
			&pb.Coordinator{From: L, To: uint64(to.id), Term: fresh, Leader: L, Confirmed: true},
			&pb.Coordinator{From: L, To: uint64(to.id), Term: termOf(l0.Term.Epoch()+1, 999), Leader: 999},
			&pb.TimeoutNow{From: L, To: uint64(to.id), Term: uint64(l0.Term)},
		}
	}

	// Outsiders: no certificate of a node.
	reader := k.pair(t, k.clientCert("web"), k.clientKey("web"))
	admin := k.pair(t, k.clientCert("alice"), k.clientKey("alice"))
	for _, p := range followers {
		for name, pc := range map[string]pb.PeerClient{
			"plaintext":               peerConn(t, p.peer, insecure.NewCredentials()),
			"TLS without certificate": peerConn(t, p.peer, k.peerCreds(t, p.id, nil)),
			"reader certificate":      peerConn(t, p.peer, k.peerCreds(t, p.id, &reader)),
			"admin certificate":       peerConn(t, p.peer, k.peerCreds(t, p.id, &admin)),
		} {
			for _, m := range forgeries(p) {
				if err := call(pc, m); status.Code(err) != codes.Unavailable {
					t.Errorf("node %d, %s, forged %T: %v, want Unavailable (refused at the handshake)", p.id, name, m, err)
				}
			}
		}
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after outsiders' forgeries")
	for _, p := range followers {
		for _, reason := range []string{"not_tls", "no_certificate", "wrong_identity"} {
			waitLog(t, p, 5*time.Second, 1, "level=WARN", `msg="tls: handshake refused" listener=peer`, "reason="+reason)
		}
	}

	// A member's certificate (follower f1's) speaking for the leader.
	asF1 := k.pair(t, k.nodeCert(f1.id), k.nodeKey(f1.id))
	pc := peerConn(t, f2.peer, k.peerCreds(t, f2.id, &asF1))
	for _, m := range forgeries(f2) {
		err := call(pc, m)
		want := fmt.Sprintf("says it is from node %d but the connection's certificate names node %d", L, f1.id)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), want) {
			t.Errorf("node %d's certificate, forged %T from node %d: %v, want PermissionDenied: %s", f1.id, m, L, err, want)
		}
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after a member's forgeries in the leader's name")

	// The member speaking as itself: the membership checks of the core.
	rejected := countIn(f2, "rejected a peer message")
	for _, m := range []any{
		&pb.Coordinator{From: uint64(f1.id), To: uint64(f2.id), Term: termOf(l0.Term.Epoch()+1, 999), Leader: 999},
		&pb.TimeoutNow{From: uint64(f1.id), To: uint64(f2.id), Term: uint64(l0.Term)},
	} {
		if err := call(pc, m); err != nil {
			t.Fatalf("node %d's own %T to node %d: %v (the transport should deliver it to the checks)", f1.id, m, f2.id, err)
		}
	}
	waitLog(t, f2, 5*time.Second, 1, "rejected a peer message", "names leader 999, not a live member")
	waitLog(t, f2, 5*time.Second, 1, "rejected a peer message", fmt.Sprintf("from %d at", f1.id), fmt.Sprintf("but this node follows %d at", L))
	if n := countIn(f2, "rejected a peer message"); n < rejected+2 {
		t.Errorf("node %d logged %d more rejections, want 2", f2.id, n-rejected)
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after a member's messages the membership checks refuse")

	// The unauthenticated kill of the issue: electctl kill 3 --exit to node 1.
	n1, n3 := procByID(ps, 1), procByID(ps, 3)
	ca := []string{"--endpoints", n1.api, "--timeout", "3s", "--cacert", k.ca()}
	if r := electctl(t, "--endpoints", n1.api, "--timeout", "3s", "kill", "3", "--exit"); r.code == exitOK {
		t.Fatalf("kill 3 --exit in plaintext: %v", r)
	}
	if r := electctl(t, append(ca, "kill", "3", "--exit")...); r.code == exitOK {
		t.Fatalf("kill 3 --exit without a client certificate: %v", r)
	}
	r := electctl(t, append(ca, "--cert", k.clientCert("web"), "--key", k.clientKey("web"), "kill", "3", "--exit")...)
	if r.code != 7 || !strings.Contains(r.stderr, "admin role is required") {
		t.Fatalf("kill 3 --exit with a reader certificate: %v, want exit 7 naming the admin role", r)
	}
	waitLog(t, n1, 5*time.Second, 1, "api: call refused", "Kill", "client/web")
	for _, reason := range []string{"not_tls", "no_certificate"} {
		waitLog(t, n1, 5*time.Second, 1, "level=WARN", `msg="tls: handshake refused" listener=api`, "reason="+reason)
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after the refused kills")
	if !n3.running() {
		t.Fatalf("node 3's process exited: %v", n3.err)
	}

	// A node without the gossip key joins node 1's gossip.
	rogue := newProc(t, t.TempDir(), 7, "bully")
	rogue.join = []string{n1.gossip}
	rogue.extra = []string{"--gossip-label", secureClusterName}
	cleanupProcs(t, []*proc{rogue})
	rogue.start()
	waitLog(t, rogue, 10*time.Second, 1, "electord started")
	waitLog(t, n1, 10*time.Second, 1, "level=ERROR", "encryption is configured but remote state is not encrypted")
	holdsFor(t, ps, w, l0, 5*time.Second, "while a node without the gossip key tries to join")
	for _, p := range ps {
		ms, err := p.cl.Members(ctxTimeout(t, 2*time.Second))
		if err != nil {
			t.Fatalf("members of node %d: %v", p.id, err)
		}
		for _, m := range ms {
			if m.ID == 7 {
				t.Fatalf("node %d lists node 7, which has no gossip key: %+v", p.id, m)
			}
		}
	}
	if c := w.changes(l0); c != "" {
		t.Fatalf("the leadership moved: %s", c)
	}
}

// TestInsecureClusterAttacks: the same attacks against a 3-node bully
// cluster started with --insecure on exposed addresses (peer and api on
// 0.0.0.0, no TLS, no gossip key), showing what docs/SECURITY.md says that
// mode leaves open:
//
//   - the membership checks still hold: a forged Coordinator naming a
//     non-member (999) is refused and logged, nothing moves;
//   - a forged Coordinator from "the leader" at a fresh epoch is taken: the
//     followers report a term the leader never minted;
//   - a forged TimeoutNow claiming to come from the leader makes a follower
//     leader at once;
//   - a node without a key joins gossip and is listed as a member;
//   - an anonymous `electctl kill 3 --exit` sent to node 1 ends node 3's
//     process.
func TestInsecureClusterAttacks(t *testing.T) {
	dir := t.TempDir()
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := newProc(t, dir, i, "bully")
		_, apiPort, _ := strings.Cut(p.api, ":")
		_, peerPort, _ := strings.Cut(p.peer, ":")
		p.extra = append([]string{"--insecure", "--api-addr", "0.0.0.0:" + apiPort, "--peer-addr", "0.0.0.0:" + peerPort,
			"--advertise-host", "127.0.0.1"}, secureTiming...)
		ps = append(ps, p)
	}
	cleanupProcs(t, ps)
	startJoined(ps)
	l0 := waitProcAgreement(t, ps, 30*time.Second, "three --insecure processes agree on a leader", nil)
	for _, p := range ps {
		waitLog(t, p, 5*time.Second, 1, "level=WARN", "INSECURE")
	}
	eventually(t, 10*time.Second, "every node lists every node alive", func() (bool, string) { return membersComplete(ps) })
	w := watchLeaders(t, ps)
	leader := procByID(ps, l0.ID)
	var followers []*proc
	for _, p := range ps {
		if p != leader {
			followers = append(followers, p)
		}
	}
	L := uint64(l0.ID)
	send := func(p *proc, m any) error {
		return sendPeer(context.Background(), peerConn(t, p.peer, insecure.NewCredentials()), m)
	}

	// Still refused: a Coordinator naming a non-member.
	for _, p := range followers {
		if err := send(p, &pb.Coordinator{From: L, To: uint64(p.id), Term: termOf(l0.Term.Epoch()+1, 999), Leader: 999}); err != nil {
			t.Fatalf("forged Coordinator for 999 to node %d: %v (want it delivered, and refused by the checks)", p.id, err)
		}
		waitLog(t, p, 5*time.Second, 1, "rejected a peer message", "names leader 999, not a live member")
	}
	holdsFor(t, ps, w, l0, fewTimeouts, "after a forged Coordinator naming a non-member")

	// Open: a Coordinator in the leader's name at a term it never minted.
	forged := client.Term(termOf(l0.Term.Epoch()+50, int(L)))
	for _, p := range followers {
		if err := send(p, &pb.Coordinator{From: L, To: uint64(p.id), Term: uint64(forged), Leader: L, Confirmed: true}); err != nil {
			t.Fatalf("forged Coordinator at %v to node %d: %v", forged, p.id, err)
		}
	}
	for _, p := range followers {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d takes the forged term %v", p.id, forged), func() (bool, string) {
			return w.saw(p.id, func(li client.LeaderInfo) bool { return li.Term == forged }), w.describe(p.id)
		})
	}
	l1 := waitProcAgreement(t, ps, 20*time.Second, "agreement after the forged Coordinator", nil)
	t.Logf("--insecure: a forged Coordinator moved the followers from %v to the forged %v; the cluster agrees on node %d at %v",
		l0.Term, forged, l1.ID, l1.Term)

	// Open: a TimeoutNow in the leader's name makes a follower leader.
	var target *proc
	for _, p := range ps {
		if p.id != int(l1.ID) {
			target = p
			break
		}
	}
	if err := send(target, &pb.TimeoutNow{From: uint64(l1.ID), To: uint64(target.id), Term: uint64(l1.Term)}); err != nil {
		t.Fatalf("forged TimeoutNow to node %d: %v", target.id, err)
	}
	eventually(t, 5*time.Second, fmt.Sprintf("node %d leads after the forged TimeoutNow", target.id), func() (bool, string) {
		return w.saw(target.id, func(li client.LeaderInfo) bool {
			return li.Self && int(li.ID) == target.id && li.Term > l1.Term
		}), w.describe(target.id)
	})
	t.Logf("--insecure: a forged TimeoutNow made node %d leader (was node %d at %v)", target.id, l1.ID, l1.Term)

	// Open: a node without a key joins gossip.
	rogue := newProc(t, t.TempDir(), 7, "bully")
	rogue.join = []string{ps[0].gossip}
	cleanupProcs(t, []*proc{rogue})
	rogue.start()
	eventually(t, 10*time.Second, "node 1 lists the rogue node 7", func() (bool, string) {
		ms, err := ps[0].cl.Members(ctxTimeout(t, time.Second))
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ms {
			if m.ID == 7 && m.Alive {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", ms)
	})
	rogue.stop()

	// Open: the anonymous kill --exit ends node 3's process.
	n3 := procByID(ps, 3)
	if r := electctl(t, "--endpoints", ps[0].api, "--timeout", "3s", "kill", "3", "--exit"); r.code != exitOK {
		t.Fatalf("anonymous kill 3 --exit: %v", r)
	}
	select {
	case <-n3.exited:
		t.Logf("--insecure: an anonymous electctl kill 3 --exit ended node 3's process: %v", n3.err)
	case <-time.After(10 * time.Second):
		t.Fatal("node 3's process still runs 10s after an anonymous kill --exit")
	}
}

// sendPeer sends one peer message, a *pb.Coordinator or a *pb.TimeoutNow,
// within 3 s of now (and ctx).
func sendPeer(ctx context.Context, pc pb.PeerClient, m any) error {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var err error
	switch m := m.(type) {
	case *pb.Coordinator:
		_, err = pc.Coordinator(c, m)
	case *pb.TimeoutNow:
		_, err = pc.TimeoutNow(c, m)
	}
	return err
}
