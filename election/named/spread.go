package named

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/electord/electord/election"
)

// Placement spread (docs/ELECTIONS.md, "Placement"): a spread candidacy
// stands with a rank derived from a rendezvous (highest-random-weight) hash
// of (election, node), so that over many elections each node is the
// top-ranked live candidate of about as many as the others, and when a node
// leaves only the elections it led move, each to its next-ranked candidate.

// SpreadHash is the rendezvous weight of node id in election name:
// FNV-1a 64 over the name's bytes followed by the id as 8 big-endian bytes,
// then the SplitMix64 finalizer (FNV alone leaves ids that differ in their
// low bits with correlated high bits), of which the top 32 bits are kept.
//
// It is a wire contract: every node must compute the same weight for the
// same pair, since each sends its own rank in its Candidacy and the others'
// machines order candidates by it. It must never change between versions
// (TestSpreadHashIsFixed pins values); a new hash would be a new placement.
func SpreadHash(name string, id election.NodeID) uint32 {
	h := fnv.New64a()
	h.Write([]byte(name))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(id))
	h.Write(b[:])
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return uint32(x >> 32)
}

// SpreadRank is the priority a spread candidacy of priority p stands with
// in election name on node id: p in the high 32 bits, the rendezvous weight
// in the low 32. The app's priority still ranks first, and candidates of
// equal priority are ordered by the hash, so equal priorities spread.
// p must be within int32 (CheckSpreadPriority).
func SpreadRank(name string, id election.NodeID, p int64) int64 {
	return p<<32 | int64(SpreadHash(name, id))
}

// CheckSpreadPriority refuses a spread candidacy's priority that does not
// fit the high half of its rank.
func CheckSpreadPriority(p int64) error {
	if p < math.MinInt32 || p > math.MaxInt32 {
		return fmt.Errorf("priority %d: with placement spread it must be within [%d, %d] (the rank keeps the hash in its low 32 bits)",
			p, math.MinInt32, math.MaxInt32)
	}
	return nil
}

// Move is one giver's share of a rebalance: Count leaderships to To.
type Move struct {
	To    election.NodeID
	Count int
}

// Imbalanced reports whether counts (leaderships per live candidate node)
// are more unequal than threshold allows: the most is more than (1 +
// threshold) times the least, and moving one leadership from the most to
// the least would narrow the gap (they differ by 2 or more).
func Imbalanced(counts map[election.NodeID]int, threshold float64) bool {
	if len(counts) < 2 {
		return false
	}
	lo, hi := math.MaxInt, 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi-lo >= 2 && float64(hi) > (1+threshold)*float64(lo)
}

// RebalancePlan is what giver should move, given leaderships per live
// candidate node: every node computes the same plan from the same counts,
// and each carries out its own part, so two givers do not both fill one
// receiver. The targets are the even split, total/len(counts) each, the
// remainder's extra one going to the nodes that lead the most (they keep
// it instead of moving it); a node above its target gives its excess to
// the nodes below theirs, givers and receivers matched in id order. Each
// move narrows the gap by one, so no leadership moves that an even split
// does not need.
func RebalancePlan(counts map[election.NodeID]int, giver election.NodeID) []Move {
	ids := make([]election.NodeID, 0, len(counts))
	total := 0
	for id, c := range counts {
		ids = append(ids, id)
		total += c
	}
	if len(ids) == 0 {
		return nil
	}
	slices.SortFunc(ids, func(a, b election.NodeID) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	target := map[election.NodeID]int{}
	for i, id := range ids {
		target[id] = total / len(ids)
		if i < total%len(ids) {
			target[id]++
		}
	}
	slices.Sort(ids)
	type slot struct {
		id   election.NodeID
		left int
	}
	var receivers []slot
	for _, id := range ids {
		if d := target[id] - counts[id]; d > 0 {
			receivers = append(receivers, slot{id, d})
		}
	}
	var out []Move
	r := 0
	for _, id := range ids {
		excess := counts[id] - target[id]
		for excess > 0 && r < len(receivers) {
			k := min(excess, receivers[r].left)
			if id == giver {
				out = append(out, Move{To: receivers[r].id, Count: k})
			}
			excess -= k
			if receivers[r].left -= k; receivers[r].left == 0 {
				r++
			}
		}
	}
	return out
}
