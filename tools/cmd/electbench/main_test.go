package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFreePortStaysInRangeAndNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < portLo || p >= portHi {
			t.Fatalf("port %d outside %d–%d", p, portLo, portHi-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestBinaries(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bins, cleanup, err := binaries(a + ",after=" + b + "," + a)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	want := []binary{{"A", a}, {"after", b}, {"C", a}}
	if len(bins) != len(want) {
		t.Fatalf("got %v, want %v", bins, want)
	}
	for i := range want {
		if bins[i] != want[i] {
			t.Errorf("binary %d: got %v, want %v", i, bins[i], want[i])
		}
	}
	if _, _, err := binaries("x=" + a + ",x=" + b); err == nil {
		t.Error("a label used twice was accepted")
	}
	if _, _, err := binaries(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing binary was accepted")
	}
}

func TestMedianSignedOverlap(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x*float64(time.Millisecond)))
		}
		return d
	}
	if got := median(ms(3, 1, 2)); got != 2*time.Millisecond {
		t.Errorf("median of 3: %v", got)
	}
	if got := median(ms(4, 1, 2, 3)); got != 2500*time.Microsecond {
		t.Errorf("median of 4: %v", got)
	}
	for d, want := range map[time.Duration]string{
		1500 * time.Microsecond: "+1.5", -1500 * time.Microsecond: "−1.5", -20 * time.Microsecond: "0.0",
	} {
		if got := signed(d); got != want {
			t.Errorf("signed(%v) = %q, want %q", d, got, want)
		}
	}
	if got := overlap(ms(10, 12), ms(11, 20), "B"); got != "overlap" {
		t.Errorf("overlapping ranges: %q", got)
	}
	if got := overlap(ms(10, 12), ms(5, 9), "B"); got != "apart: B lower" {
		t.Errorf("lower range: %q", got)
	}
	if got := overlap(ms(10, 12), ms(13, 14), "B"); got != "apart: B higher" {
		t.Errorf("higher range: %q", got)
	}
}
