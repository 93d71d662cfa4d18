//go:build linux

package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistQuantiles(t *testing.T) {
	var h hist
	var xs []time.Duration
	for i := 0; i < 100000; i++ {
		d := time.Duration(rand.ExpFloat64() * float64(50*time.Microsecond))
		xs = append(xs, d)
		h.add(d)
	}
	slices.Sort(xs)
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := xs[int(q*float64(len(xs)))-1]
		got := h.quantile(q)
		if diff := float64(got-want) / float64(want); diff > 0.01 || diff < -0.01 {
			t.Errorf("q%v: got %v want %v", q, got, want)
		}
	}
	for v := uint64(0); v < 1<<20; v += 7 {
		i := histIndex(v)
		if lo, hi := histValue(i), histValue(i+1); v > hi || (v >= 128 && float64(lo) > float64(v)*1.01) {
			t.Fatalf("v=%d idx=%d mid=%d next=%d", v, i, lo, hi)
		}
	}
}
