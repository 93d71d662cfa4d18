package node

import (
	"context"
	"testing"
)

// BenchmarkOwnDigest10k: a node's digest of its own standing in 10,000
// elections, counted once a resend period when its members' digests come.
func BenchmarkOwnDigest10k(b *testing.B) {
	c := newTunedCluster(b, "bully", 1, 0, nil, nil)
	nd := c.nodes[1]
	s, err := nd.CampaignMany(context.Background(), shardNames(10_000))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	for range b.N {
		if err := nd.do(context.Background(), func() error {
			nd.named.resend.ownIn = 0 // not counted this period
			nd.ownDigest()
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
