package main

import (
	"slices"
	"testing"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

func TestElectionNames(t *testing.T) {
	if got := electionNames(1); !slices.Equal(got, []string{"jobs"}) {
		t.Errorf("one election: %v", got)
	}
	got := electionNames(100)
	if len(got) != 100 || got[0] != "jobs-000" || got[99] != "jobs-099" || !slices.IsSorted(got) {
		t.Errorf("100 elections: %d names, %v ... %v", len(got), got[0], got[len(got)-1])
	}
	if got := electionNames(1001); got[1000] != "jobs-1000" || got[7] != "jobs-0007" {
		t.Errorf("1001 elections: %v, %v", got[7], got[1000])
	}
}

func TestNewLeader(t *testing.T) {
	old := &pb.LeaderInfo{Id: 1, Term: 10, Value: "app-1"}
	for _, c := range []struct {
		ev   *pb.LeaderInfo
		want bool
	}{
		{&pb.LeaderInfo{Id: 2, Term: 11, Value: "app-2"}, true},
		{&pb.LeaderInfo{Id: 0, Term: 11}, false},                      // no leader yet
		{&pb.LeaderInfo{Id: 1, Term: 10, Value: "app-1"}, false},      // the old leadership
		{&pb.LeaderInfo{Id: 1, Term: 10, Value: "app-1:9090"}, false}, // proclaimed: same term
		{&pb.LeaderInfo{Id: 1, Term: 12, Value: "app-1"}, false},      // the same app again
		{&pb.LeaderInfo{Id: 2, Term: 9, Value: "app-2"}, false},       // an older leadership
	} {
		if got := newLeader(old, c.ev); got != c.want {
			t.Errorf("newLeader(%v, %v) = %v, want %v", old, c.ev, got, c.want)
		}
	}
}

func TestMostLed(t *testing.T) {
	leaders := map[string]*pb.LeaderInfo{
		"a": {Id: 3}, "b": {Id: 2}, "c": {Id: 3}, "d": {Id: 2}, "e": {Id: 0}, "f": {Id: 0}, "g": {Id: 0},
	}
	if id, n := mostLed(leaders); id != 2 || n != 2 {
		t.Errorf("mostLed = %d, %d; want node 2 (a tie goes to the lower id; no leader is never chosen), 2", id, n)
	}
	if id, n := mostLed(nil); id != 0 || n != 0 {
		t.Errorf("mostLed(nil) = %d, %d", id, n)
	}
}

func TestPercentiles(t *testing.T) {
	var s samples
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(101-i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{0.5: 50, 0.9: 90, 0.99: 99, 1: 100} {
		if got := s.pct(p); got != want*time.Millisecond {
			t.Errorf("p%v = %v, want %v", p*100, got, want*time.Millisecond)
		}
	}
}

func TestArgValue(t *testing.T) {
	args := []string{"--id", "1", "--join", "127.0.0.1:20002", "--verbose"}
	for flag, want := range map[string]string{"--id": "1", "--join": "127.0.0.1:20002", "--verbose": "", "--gossip-addr": ""} {
		if got := argValue(args, flag); got != want {
			t.Errorf("argValue(%s) = %q, want %q", flag, got, want)
		}
	}
}
