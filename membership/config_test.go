package membership

import (
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func goodConfig() Config {
	return Config{Self: Meta{ID: 1, Name: "a"}, BindAddr: "127.0.0.1:0", Preset: "local"}
}

func TestValidateNamesTheKey(t *testing.T) {
	if err := goodConfig().Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		key string
		mod func(*Config)
	}{
		{"id", func(c *Config) { c.Self.ID = 0 }},
		{"gossip-addr", func(c *Config) { c.BindAddr = "" }},
		{"gossip-addr", func(c *Config) { c.BindAddr = "127.0.0.1" }},
		{"gossip-addr", func(c *Config) { c.BindAddr = "localhost:7946" }},
		{"gossip-addr", func(c *Config) { c.BindAddr = "127.0.0.1:70000" }},
		{"advertise-host", func(c *Config) { c.AdvertiseAddr = "bad host" }},
		{"advertise-host", func(c *Config) { c.AdvertiseAddr = "10.0.0.1:0" }},
		{"join", func(c *Config) { c.Join = []string{""} }},
		{"join", func(c *Config) { c.Join = []string{"seed:notaport"} }},
		{"join", func(c *Config) { c.Join = []string{"a/b"} }},
		{"join", func(c *Config) { c.Join = []string{"-bad-.example"} }},
		{"name", func(c *Config) { c.Self.Name = strings.Repeat("x", memberlist.MetaMaxSize) }},
	} {
		c := goodConfig()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.key) {
			t.Errorf("%+v: Validate() = %v, want an error starting with %q", c, err, tc.key)
		}
	}
	c := goodConfig()
	c.BindAddr, c.AdvertiseAddr, c.Preset = ":7946", "pod-0.electord.default.svc", ""
	c.Join = []string{"electord", "electord:7000", "10.0.0.1", "[::1]:7946", "::1", "[fe80::1]"}
	if err := c.Validate(); err != nil {
		t.Errorf("valid forms rejected: %v", err)
	}
}

// New refuses a Preset that names no preset, naming the key; an empty one
// is no preset either (the default, lan, is config's).
func TestNewRejectsUnknownPreset(t *testing.T) {
	for _, name := range []string{"wan", ""} {
		c := goodConfig()
		c.Preset = name
		if m, err := New(c); err == nil || !strings.HasPrefix(err.Error(), "gossip-preset: must be lan or local") {
			if m != nil {
				m.Shutdown()
			}
			t.Errorf("New with preset %q: %v, want a gossip-preset error", name, err)
		}
	}
}

func TestNewRejectsLargeMeta(t *testing.T) {
	c := goodConfig()
	c.Self.APIAddr = strings.Repeat("h", 500) + ":1"
	_, err := New(c)
	if err == nil || !strings.Contains(err.Error(), "512") {
		t.Fatalf("New with big metadata: %v", err)
	}
}

func TestSplitSeed(t *testing.T) {
	for in, want := range map[string]struct {
		host string
		port int
	}{
		"electord":                           {"electord", DefaultGossipPort},
		"electord.default.svc.cluster.local": {"electord.default.svc.cluster.local", DefaultGossipPort},
		"electord:7000":                      {"electord", 7000},
		"10.0.0.1":                           {"10.0.0.1", DefaultGossipPort},
		"10.0.0.1:1":                         {"10.0.0.1", 1},
		"::1":                                {"::1", DefaultGossipPort},
		"[::1]":                              {"::1", DefaultGossipPort},
		"[::1]:8":                            {"::1", 8},
	} {
		h, p, err := splitSeed(in)
		if err != nil || h != want.host || p != want.port {
			t.Errorf("splitSeed(%q) = %q, %d, %v; want %q, %d", in, h, p, err, want.host, want.port)
		}
	}
}

func TestPresets(t *testing.T) {
	lan := memberlist.DefaultLANConfig()
	ps := Presets()
	if len(ps) != 2 || ps[0].Name != "lan" || ps[1].Name != "local" {
		t.Fatalf("presets %v", ps)
	}
	for _, p := range ps {
		mc := memberlist.DefaultLANConfig()
		if err := p.apply(mc); err != nil {
			t.Fatal(err)
		}
		fields := map[string]bool{}
		for _, s := range p.Settings {
			if fields[s.Field] || s.Doc == "" {
				t.Errorf("%s: %s repeated or undocumented", p.Name, s.Field)
			}
			fields[s.Field] = true
			if p.Name == "lan" {
				if got := reflect.ValueOf(lan).Elem().FieldByName(s.Field).Interface(); got != s.Value {
					t.Errorf("lan %s = %v, memberlist.DefaultLANConfig has %v", s.Field, s.Value, got)
				}
			}
		}
		if p.RejoinEvery <= 0 || p.RejoinMaxBackoff < p.RejoinEvery {
			t.Errorf("%s: RejoinEvery %v, RejoinMaxBackoff %v", p.Name, p.RejoinEvery, p.RejoinMaxBackoff)
		}
		if mc.ProbeTimeout >= mc.ProbeInterval {
			t.Errorf("%s: ProbeTimeout %v not below ProbeInterval %v", p.Name, mc.ProbeTimeout, mc.ProbeInterval)
		}
		if p.Name == "local" && (mc.ProbeInterval != 200*time.Millisecond || mc.GossipInterval != 50*time.Millisecond) {
			t.Errorf("local: %v %v", mc.ProbeInterval, mc.GossipInterval)
		}
	}
	// Both presets set the same fields, so printing them side by side works.
	for i, s := range ps[0].Settings {
		if ps[1].Settings[i].Field != s.Field {
			t.Errorf("setting %d: lan %s, local %s", i, s.Field, ps[1].Settings[i].Field)
		}
	}
	if err := (Preset{Name: "x", Settings: []Setting{{"ProbeInterval", 3, ""}}}).apply(memberlist.DefaultLANConfig()); err == nil {
		t.Error("a mistyped setting applied")
	}
}

func TestEventQueueNeverBlocksAndKeepsOrder(t *testing.T) {
	q := newEventQueue()
	defer q.close()
	const n = 10000
	for i := range n { // nobody reads yet
		q.push(Event{Type: Join, Member: Meta{ID: 1, Priority: int64(i)}})
	}
	for i := range n {
		select {
		case ev := <-q.out:
			if ev.Member.Priority != int64(i) {
				t.Fatalf("event %d has priority %d", i, ev.Member.Priority)
			}
		case <-time.After(deadline):
			t.Fatalf("event %d did not come", i)
		}
	}
	q.close()
	q.push(Event{Type: Join})
	if _, ok := <-q.out; ok {
		t.Fatal("channel open after close")
	}
}

func TestMemberlistLogLevels(t *testing.T) {
	sink := &logSink{}
	var closing atomic.Bool
	l := memberlistLogger(slog.New(sink), &closing, nil)
	l.Printf("[ERR] memberlist: Conflicting address for 7")
	l.Printf("[DEBUG] memberlist: Stream connection")
	if !sink.find("ERROR", "Conflicting address for 7") || !sink.find("DEBUG", "Stream connection") {
		t.Fatalf("records %q", sink.recs)
	}
	// Leaving: the node's own closed sockets are no warning.
	closing.Store(true)
	l.Printf("[ERR] memberlist: Failed to send indirect UDP ping: use of closed network connection")
	if !sink.find("DEBUG", "use of closed network connection") || sink.find("ERROR", "use of closed network connection") {
		t.Fatalf("records %q", sink.recs)
	}
}
