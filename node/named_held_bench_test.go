package node

import (
	"context"
	"testing"
)

// BenchmarkOwnDigest10k: a node's digest of its own standing in 10,000
// elections, counted again after every one of them changed (a mass
// failover's worst case; at rest a comparison counts none).
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
			for name := range nd.named.machines {
				nd.named.own.restand(name)
			}
			nd.ownDigest()
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpreadCounts10k: one scan of the spread rebalancer (its counts of
// the leaderships per node) on a node standing in 10,000 spread elections
// of five nodes, at rest.
func BenchmarkSpreadCounts10k(b *testing.B) {
	b.Setenv("ELECTORD_BENCH_PLACEMENT", string(PlacementSpread))
	c, _, _ := restingNamedCluster(b, "bully", 10_000)
	nd := c.nodes[1]
	b.ResetTimer()
	for range b.N {
		if err := nd.do(context.Background(), func() error {
			if _, _, settled := nd.spreadCounts(); !settled {
				b.Error("the counts are not settled at rest")
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
