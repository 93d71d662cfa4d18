//go:build linux && lfvariant

package lf

import (
	"testing"

	"github.com/electord/electord/transport/lf/engine"
)

// The comparison variants' tests, run with -tags lfvariant.

// TestVariantsSinglePollerAndOwner is TestSinglePollerAndOwner on every
// comparison variant.
func TestVariantsSinglePollerAndOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		v    Variant
	}{
		{"FIFO", Config{Workers: 6}, Variant{FIFO: true}},
		{"SixteenEventsPerWait", Config{Workers: 6}, Variant{EventsPerWait: 16}},
		{"LockOSThread-smallBudget", Config{Workers: 4, ReadBudget: 4 << 10}, Variant{LockOSThread: true}},
		{"BlockingWait", Config{Workers: 4}, Variant{BlockingWait: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSinglePollerAndOwner(t, tc.cfg, variant(tc.v)) })
	}
}

func TestVariantDefaults(t *testing.T) {
	if v := variant(Variant{}); v.fifo() || v.lockOSThread() || v.blockingWait() || v.eventsPerWait() != 1 {
		t.Fatalf("zero Variant %+v; want LIFO, unlocked, parked, one event per wait", v)
	}
	if v := variant(Variant{EventsPerWait: 16}); v.eventsPerWait() != 16 {
		t.Fatalf("EventsPerWait 16 gives %d", v.eventsPerWait())
	}
	if _, err := NewVariant(engine.NewRegistry(), nodeConfig(Config{}), Variant{EventsPerWait: MaxEventsPerWait + 1}); err == nil {
		t.Fatal("EventsPerWait over the maximum accepted")
	}
	if _, err := NewVariant(engine.NewRegistry(), nodeConfig(Config{}), Variant{EventsPerWait: -1}); err == nil {
		t.Fatal("negative EventsPerWait accepted")
	}
	s, err := NewVariant(engine.NewRegistry(), nodeConfig(Config{Workers: 3}), Variant{FIFO: true})
	if err != nil || s.cfg.Workers != 3 || !s.variant.fifo() {
		t.Fatalf("NewVariant: %v, %+v", err, s)
	}
}
