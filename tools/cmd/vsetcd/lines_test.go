package main

import (
	"testing"
	"time"
)

func TestParseCandidateLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want candidateLine
	}{
		{"ready 1795385215790711353 c1 457ea2054c436d05 2", candidateLine{kind: "ready", at: time.Unix(0, 1795385215790711353), leader: "c1", ttl: 2}},
		{"observe 1795385216291111759 c1 2", candidateLine{kind: "observe", at: time.Unix(0, 1795385216291111759), leader: "c1", rev: 2}},
		{"elected 1795385218815431498 c2", candidateLine{kind: "elected", at: time.Unix(0, 1795385218815431498), leader: "c2"}},
		{"resigned 1795385220306431156 c2", candidateLine{kind: "resigned", at: time.Unix(0, 1795385220306431156), leader: "c2"}},
		{"error 1795385220306431156 campaign: context canceled", candidateLine{kind: "error", at: time.Unix(0, 1795385220306431156), text: "campaign: context canceled"}},
	} {
		got, err := parseCandidateLine(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseCandidateLine(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "observe", "observe x c1 2", "observe 1 c1", "observe 1 c1 x", "ready 1 c1 ff", "hello 1 c1"} {
		if _, err := parseCandidateLine(bad); err == nil {
			t.Errorf("parseCandidateLine(%q): no error", bad)
		}
	}
}

func TestParseSSEData(t *testing.T) {
	for _, tc := range []struct {
		in     string
		ok     bool
		leader string
		term   uint64
		self   bool
	}{
		{`data: {"id":4,"name":"node-4","address":"127.0.0.1:1","term":7,"since":"2026-11-22T22:09:46Z","self":true,"state":"leader"}`, true, "4", 7, true},
		{`data: {"state":"no_leader","term":3}`, true, "", 3, false},
		{"event: leader", false, "", 0, false},
		{": keep-alive", false, "", 0, false},
		{"", false, "", 0, false},
	} {
		ev, ok, err := parseSSEData(tc.in)
		if err != nil || ok != tc.ok || ev.leaderName() != tc.leader || ev.Term != tc.term || ev.Self != tc.self {
			t.Errorf("parseSSEData(%q) = %+v, %v, %v", tc.in, ev, ok, err)
		}
	}
	if _, _, err := parseSSEData("data: {"); err == nil {
		t.Error("bad JSON: no error")
	}
}

func TestPct(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 20; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{0.5: 10 * time.Millisecond, 0.9: 18 * time.Millisecond, 0.99: 20 * time.Millisecond, 1: 20 * time.Millisecond} {
		if got := pct(ds, p); got != want {
			t.Errorf("pct(1..20 ms, %v) = %v, want %v", p, got, want)
		}
	}
}

func TestParseShards(t *testing.T) {
	kvs := []shardKV{
		{shardsPrefix + "shard-00000/6a", "c2", 12},
		{shardsPrefix + "shard-00000/6b", "c1", 9},
		{shardsPrefix + "shard-00001/6a", "c2", 10},
		{"/other/shard-00002/6a", "c3", 1},
		{shardsPrefix + "nokey", "c4", 1},
	}
	leader, cands := parseShards(kvs)
	if len(leader) != 2 || leader["shard-00000"] != "c1" || leader["shard-00001"] != "c2" {
		t.Errorf("leaders = %v; want shard-00000 c1 (lowest create revision), shard-00001 c2", leader)
	}
	if cands["shard-00000"] != 2 || cands["shard-00001"] != 1 || len(cands) != 2 {
		t.Errorf("candidates = %v", cands)
	}
	if got := shardName(7, 100000); got != "shard-00007" {
		t.Errorf("shardName(7, 100000) = %q", got)
	}
	if got := shardName(7, 100001); got != "shard-000007" {
		t.Errorf("shardName(7, 100001) = %q", got)
	}
}
