package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	pb "github.com/electord/electord/proto/electord/v1"
)

// TestForgedTermAtTheEdgeIsRefused (issue 11): a Coordinator naming node 1
// at the largest epoch (2^48-1), or just past election.MaxEpoch, sent to
// every node of a real 3-node cluster made all three panic and rewrote the
// term file downwards. Now each is refused as an invalid argument, nothing
// panics, the leader and its term stay, and the term files hold.
func TestForgedTermAtTheEdgeIsRefused(t *testing.T) {
	for _, quorum := range []int{0, 3} {
		t.Run(map[int]string{0: "plain", 3: "quorum=3"}[quorum], func(t *testing.T) {
			dir := t.TempDir()
			c := startCluster(t, devcluster.Options{Nodes: 3, Algorithm: "bully", Quorum: quorum, DataDir: dir})
			before := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
			files := map[string][]byte{}
			for i := 1; i <= 3; i++ {
				p := filepath.Join(dir, "node-"+string(rune('0'+i)), "term")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatalf("reading %s: %v", p, err)
				}
				files[p] = b
			}
			edges := []election.Term{
				election.Term((1<<48-1)<<election.SlotBits | 1),
				election.Term((1<<48-2)<<election.SlotBits | 1),
				election.Term((election.MaxEpoch+1)<<election.SlotBits | 1),
			}
			for _, d := range c.Nodes {
				conn, err := grpc.NewClient(d.PeerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				peer := pb.NewPeerClient(conn)
				for _, term := range edges {
					for _, confirmed := range []bool{true, false} {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						_, err := peer.Coordinator(ctx, &pb.Coordinator{From: 1, To: uint64(d.Config.ID), Term: uint64(term), Leader: 1, Confirmed: confirmed})
						cancel()
						if status.Code(err) != codes.InvalidArgument {
							t.Errorf("node %d: forged Coordinator at %v: %v, want InvalidArgument", d.Config.ID, term, err)
						}
					}
				}
				conn.Close()
			}
			// The cluster keeps its leader at its term: no node adopted the
			// forged term, nor crashed.
			after := waitAgreement(t, c.Nodes, 5*time.Second, "agreement after the forged terms")
			if after.ID != before.ID || after.Term != before.Term {
				t.Errorf("leader %d at %v after the forgeries, was %d at %v", after.ID, after.Term, before.ID, before.Term)
			}
			for _, d := range c.Nodes {
				if st := d.Node.Status(); st.Term.Epoch() > election.MaxEpoch || st.Leader.Term != before.Term {
					t.Errorf("node %d: term %v, leader term %v after the forgeries", d.Config.ID, st.Term, st.Leader.Term)
				}
			}
			for p, b := range files {
				s, err := node.OpenTermStore(filepath.Dir(p))
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Load()
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if got.Term.Epoch() > election.MaxConfigEpoch {
					t.Errorf("%s holds %v (was %q)", p, got.Term, b)
				}
			}
		})
	}
}
