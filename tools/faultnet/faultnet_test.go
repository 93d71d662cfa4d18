package faultnet

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestRuleset(t *testing.T) {
	rs := ruleset([]string{ip(1), ip(3)})
	for _, want := range []string{"*filter\n", "-A INPUT -s 10.77.0.1/32 -j DROP\n", "-A INPUT -s 10.77.0.3/32 -j DROP\n", "COMMIT\n"} {
		if !strings.Contains(rs, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, rs)
		}
	}
	if strings.Contains(ruleset(nil), "-A ") {
		t.Errorf("an empty ruleset has rules:\n%s", ruleset(nil))
	}
}

func TestStale(t *testing.T) {
	self := Prefix + strconv.Itoa(os.Getpid()) + "-1-hub"
	if stale(self) {
		t.Errorf("%s (this process) called stale", self)
	}
	if !stale(Prefix + "2147483647-1-n1") {
		t.Error("a name whose process cannot exist is not stale")
	}
	if !stale(Prefix + "garbage") {
		t.Error("a name without a pid is not stale")
	}
}

func TestTag(t *testing.T) {
	for _, ok := range []string{"", "blip", "run7", "abcdefghij123456"} {
		if !validTag(ok) {
			t.Errorf("tag %q refused", ok)
		}
	}
	for _, bad := range []string{"Blip", "a-b", "a b", "../x", "abcdefghij1234567"} {
		if validTag(bad) {
			t.Errorf("tag %q accepted", bad)
		}
		if _, err := New(Config{Nodes: 1, Tag: bad}); err == nil || !strings.Contains(err.Error(), "tag") {
			t.Errorf("New with tag %q: %v, want an error naming the tag", bad, err)
		}
	}
	// A tagged name still starts with the creator's pid, so Sweep can
	// judge it.
	if stale(Prefix + strconv.Itoa(os.Getpid()) + "-1-blip-n1") {
		t.Error("a tagged name of this process called stale")
	}
}
