package membership

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

func startWith(t *testing.T, id election.NodeID, tune func(*Config)) *testNode {
	t.Helper()
	logs := &logSink{}
	cfg := Config{Self: metaFor(id, "n"), BindAddr: "127.0.0.1:0", Preset: "local", Logger: slog.New(logs), KeyPoll: 20 * time.Millisecond}
	tune(&cfg)
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%d): %v", id, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return &testNode{Membership: m, t: t, logs: logs}
}

func newKey(t *testing.T) string {
	k := make([]byte, 32)
	rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

func writeKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("# gossip keys\n"+strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func keyFile(t *testing.T, keys ...string) string {
	p := filepath.Join(t.TempDir(), "gossip.key")
	writeKeys(t, p, keys...)
	return p
}

func TestReadKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty":     "# nothing\n\n",
		"notbase64": "!!!\n",
		"short":     base64.StdEncoding.EncodeToString([]byte("short")) + "\n",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := ReadKeyFile(p); err == nil || !strings.Contains(err.Error(), "gossip-key-file") {
			t.Errorf("%s: err = %v, want one naming gossip-key-file", name, err)
		}
	}
	if _, err := New(Config{Self: metaFor(1, "a"), BindAddr: "127.0.0.1:0", Preset: "local", KeyFile: filepath.Join(dir, "missing")}); err == nil {
		t.Error("New with a missing key file succeeded")
	}
}

// Nodes with different keys, or with different labels, or one encrypted
// and one plain, never merge.
func TestGossipKeysAndLabelsSeparateClusters(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	cases := map[string][2]func(*Config){
		"different keys": {
			func(c *Config) { c.KeyFile = keyFile(t, k1) },
			func(c *Config) { c.KeyFile = keyFile(t, k2) },
		},
		"key and no key": {
			func(c *Config) { c.KeyFile = keyFile(t, k1) },
			func(c *Config) {},
		},
		"different labels": {
			func(c *Config) { c.Label = "prod" },
			func(c *Config) { c.Label = "staging" },
		},
		"same key, different labels": {
			func(c *Config) { c.KeyFile, c.Label = keyFile(t, k1), "prod" },
			func(c *Config) { c.KeyFile, c.Label = keyFile(t, k1), "staging" },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := startWith(t, 1, tc[0])
			b := startWith(t, 2, tc[1])
			if n, err := b.Join([]string{a.LocalAddr()}); err == nil && n > 0 {
				t.Fatalf("b joined a: %d contacted", n)
			}
			time.Sleep(500 * time.Millisecond)
			if len(a.Members()) != 1 || len(b.Members()) != 1 { // itself only
				t.Fatalf("merged: a sees %v, b sees %v", ids(a.Members()), ids(b.Members()))
			}
		})
	}
	t.Run("same key and label", func(t *testing.T) {
		f := func(c *Config) { c.KeyFile, c.Label = keyFile(t, k1), "prod" }
		a, b := startWith(t, 1, f), startWith(t, 2, f)
		b.join(a.LocalAddr())
		a.wait("join of 2", is(Join, 2), nil)
	})
}

// Install, use, remove: the cluster stays together through a rotation, and
// a node with only the new key joins at the end.
func TestGossipKeyRotation(t *testing.T) {
	oldK, newK := newKey(t), newKey(t)
	fa, fb := keyFile(t, oldK), keyFile(t, oldK)
	a := startWith(t, 1, func(c *Config) { c.KeyFile = fa })
	b := startWith(t, 2, func(c *Config) { c.KeyFile = fb })
	b.join(a.LocalAddr())
	a.wait("join of 2", is(Join, 2), nil)
	b.wait("join of 1", is(Join, 1), nil)
	gone := func(ev Event) bool { return ev.Type == Dead || ev.Type == Leave }
	for i, step := range [][]string{{oldK, newK}, {newK, oldK}, {newK}} {
		// One node ahead of the other, as in a rolling change: b's file
		// changes only once a has taken the new keys.
		writeKeys(t, fa, step...)
		a.waitLogged("INFO gossip keys reloaded", i+1)
		writeKeys(t, fb, step...)
		b.waitLogged("INFO gossip keys reloaded", i+1)
		for _, n := range []*testNode{a, b} {
			if n.logs.count("ERROR", "") > 0 || len(n.Members()) != 2 {
				t.Fatalf("after %d keys: node %s sees %v; logged %v", len(step), n.name, ids(n.Members()), n.logs.all())
			}
		}
	}
	select {
	case ev := <-a.Events():
		if gone(ev) {
			t.Fatalf("a saw %v during the rotation", ev)
		}
	default:
	}
	c := startWith(t, 3, func(c *Config) { c.KeyFile = keyFile(t, newK) })
	c.join(a.LocalAddr())
	a.wait("join of 3", is(Join, 3), gone)
}
