//go:build linux

package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a log-linear latency histogram in nanoseconds: values below 128
// are exact, above that each power of two is split into 128 buckets, so a
// reported quantile is within 0.8% of the true sample. It is safe for
// concurrent use (one atomic add per sample) and its size is fixed (60 KB),
// whatever the number of calls.
type hist struct {
	b [58 * 128]atomic.Uint64
	n atomic.Uint64
}

const histSub = 7 // 1<<histSub buckets per power of two

func histIndex(v uint64) int {
	if v < 1<<histSub {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - histSub
	return (shift+1)<<histSub + int(v>>shift) - 1<<histSub
}

// histValue is the midpoint of bucket i.
func histValue(i int) uint64 {
	if i < 1<<histSub {
		return uint64(i)
	}
	shift := i>>histSub - 1
	lo := uint64(i&(1<<histSub-1)+1<<histSub) << shift
	return lo + (uint64(1)<<shift)/2
}

func (h *hist) add(d time.Duration) {
	v := uint64(max(d, 0))
	i := histIndex(v)
	if i >= len(h.b) {
		i = len(h.b) - 1
	}
	h.b[i].Add(1)
	h.n.Add(1)
}

// quantile returns the q-quantile (0 < q <= 1), 0 when empty.
func (h *hist) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.999999)
	rank = min(max(rank, 1), n)
	var c uint64
	for i := range h.b {
		c += h.b[i].Load()
		if c >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(len(h.b) - 1))
}
