package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

// A pass of a few named leadership changes logs a line each; a pass of many
// (a node's failover) logs one line per role and leader at info, with the
// count, the terms and a few names, and every election at debug.
func TestNamedChangeLogSumsUpAFailover(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var l namedChangeLog
	t1 := election.NextTerm(0, 1)
	for i := range 3 {
		l.add(fmt.Sprintf("jobs-%d", i), election.Leadership{Role: election.RoleLeader, Leader: 1, Term: t1})
	}
	l.flush(log)
	if got := strings.Count(buf.String(), "level=INFO"); got != 3 || strings.Contains(buf.String(), "level=DEBUG") {
		t.Fatalf("3 changes: %d info lines, want one each:\n%s", got, buf.String())
	}
	buf.Reset()
	for i := range 100 {
		ch := election.Leadership{Role: election.RoleFollower, Leader: 5, Term: election.NextTerm(t1, 5)}
		if i%4 == 0 {
			ch = election.Leadership{Role: election.RoleNoLeader, Term: t1}
		}
		l.add(fmt.Sprintf("jobs-%03d", i), ch)
	}
	l.flush(log)
	var info []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "level=INFO") {
			info = append(info, line)
		}
	}
	if len(info) != 2 || strings.Count(buf.String(), "level=DEBUG") != 100 {
		t.Fatalf("100 changes: %d info and %d debug lines, want 2 and 100:\n%s", len(info), strings.Count(buf.String(), "level=DEBUG"), buf.String())
	}
	if !strings.Contains(info[0], "elections=25") || !strings.Contains(info[0], "role=no_leader") ||
		!strings.Contains(info[0], `names="jobs-000 jobs-004 jobs-008 jobs-012 jobs-016 and 20 more"`) {
		t.Fatalf("first summary: %s", info[0])
	}
	if !strings.Contains(info[1], "elections=75") || !strings.Contains(info[1], "leader=5") || !strings.Contains(info[1], "role=follower") {
		t.Fatalf("second summary: %s", info[1])
	}
	if len(l.names) != 0 {
		t.Fatal("flush kept the pass's changes")
	}
}
