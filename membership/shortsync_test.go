package membership

import (
	"fmt"
	"log/slog"

	"slices"
	"strings"

	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// deafNet drops every gossip packet (UDP) sent to the deaf address, while
// its TCP (joins, push/pull, fallback pings) still works: the node hears
// no join broadcast, as a node that missed them while a large cluster formed.
type deafNet struct {
	mu   sync.Mutex
	deaf string
}

func (d *deafNet) drops(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return addr == d.deaf
}

type deafTransport struct {
	memberlist.NodeAwareTransport
	net *deafNet
}

func (t *deafTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.net.drops(addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t *deafTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.net.drops(a.Addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

// A node that joined its seed before the others and hears none of their
// join broadcasts completes its view by a state sync with a live member
// (here its seed, the only one it knows) within seconds when it is short of
// BootstrapExpect, not at memberlist's next push/pull (30 s in the lan
// preset, 60 s above 32 members).
func TestShortViewIsSyncedFromAMember(t *testing.T) {
	d := &deafNet{}
	startDeaf := func(id election.NodeID, seeds []string) *Membership {
		cfg := Config{Self: metaFor(id, fmt.Sprintf("n%d", id)), BindAddr: "127.0.0.1:0", Preset: "lan", Join: seeds,
			Logger: slog.New(&logSink{}), BootstrapExpect: 4}
		cfg.wrapTransport = func(nt memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			return &deafTransport{NodeAwareTransport: nt, net: d}
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		return m
	}
	seed := startDeaf(1, nil)
	seed.RetryJoin()
	late := startDeaf(2, []string{seed.LocalAddr()})
	d.mu.Lock()
	d.deaf = late.LocalAddr()
	d.mu.Unlock()
	late.RetryJoin()
	waitFor(t, "node 2 to see its seed", func() bool { return slices.Equal(ids(late.Members()), []election.NodeID{1, 2}) })
	for _, id := range []election.NodeID{3, 4} {
		startDeaf(id, []string{seed.LocalAddr()}).RetryJoin()
	}
	want := []election.NodeID{1, 2, 3, 4}
	deadline := time.Now().Add(5 * time.Second) // well under the lan preset's 30 s push/pull
	for !slices.Equal(ids(late.Members()), want) {
		if time.Now().After(deadline) {
			t.Fatalf("node 2, short of BootstrapExpect 4 and deaf to broadcasts, sees %v after 5 s, want %v", ids(late.Members()), want)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if !slices.Equal(ids(seed.Members()), want) {
		t.Fatalf("seed sees %v, want %v", ids(seed.Members()), want)
	}
	if late.short() {
		t.Fatal("node 2 sees every expected member but still counts itself short")
	}
}

func TestBootstrapExpectIsValidated(t *testing.T) {
	err := Config{Self: metaFor(1, "n1"), BindAddr: "127.0.0.1:0", Preset: "lan", BootstrapExpect: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "bootstrap-expect") {
		t.Fatalf("BootstrapExpect -1: %v, want an error naming bootstrap-expect", err)
	}
}
