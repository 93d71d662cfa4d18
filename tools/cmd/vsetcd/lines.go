package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// candidateLine is one parsed stdout line of etcdcandidate (see its doc).
type candidateLine struct {
	kind   string    // ready, observe, elected, resigned, error
	at     time.Time // wall clock of the candidate when it learned of the event
	leader string    // observe: the leader's name; elected, resigned, ready: the candidate's
	rev    uint64    // observe: the leader key's create revision
	ttl    int64     // ready: the granted lease TTL in seconds
	text   string    // error: the message
}

func parseCandidateLine(s string) (candidateLine, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return candidateLine{}, fmt.Errorf("short line %q", s)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return candidateLine{}, fmt.Errorf("line %q: time: %v", s, err)
	}
	l := candidateLine{kind: f[0], at: time.Unix(0, ns)}
	want := map[string]int{"ready": 5, "observe": 4, "elected": 3, "resigned": 3}[l.kind]
	switch {
	case l.kind == "error":
		l.text = strings.Join(f[2:], " ")
		return l, nil
	case want == 0:
		return candidateLine{}, fmt.Errorf("line %q: unknown kind", s)
	case len(f) != want:
		return candidateLine{}, fmt.Errorf("line %q: %d fields, want %d", s, len(f), want)
	}
	l.leader = f[2]
	switch l.kind {
	case "observe":
		l.rev, err = strconv.ParseUint(f[3], 10, 64)
	case "ready":
		l.ttl, err = strconv.ParseInt(f[4], 10, 64)
	}
	if err != nil {
		return candidateLine{}, fmt.Errorf("line %q: %v", s, err)
	}
	return l, nil
}

// leaderEvent is the JSON of one electord sidecar /watch event ("event:
// leader", then "data: {...}"): the /leader body, or {"state":"no_leader",
// "term":N} when the node knows no leader.
type leaderEvent struct {
	ID    uint64 `json:"id"`
	Term  uint64 `json:"term"`
	Self  bool   `json:"self"`
	State string `json:"state"`
}

// parseSSEData parses an SSE line; ok is false for lines that are not data
// (event names, comments, blank separators).
func parseSSEData(line string) (ev leaderEvent, ok bool, err error) {
	data, found := strings.CutPrefix(line, "data:")
	if !found {
		return leaderEvent{}, false, nil
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &ev); err != nil {
		return leaderEvent{}, false, fmt.Errorf("/watch data %q: %v", data, err)
	}
	return ev, true, nil
}

// leaderName is the member name of an electord event's leader, "" for none.
func (ev leaderEvent) leaderName() string {
	if ev.ID == 0 || ev.State == "no_leader" {
		return ""
	}
	return strconv.FormatUint(ev.ID, 10)
}
