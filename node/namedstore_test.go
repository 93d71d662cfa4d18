package node

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/electord/electord/election"
)

func TestNamedStoreBatchesAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t1 := election.NextTerm(0, 1)
	// Many elections asked in one iteration: one write.
	for _, name := range []string{"a", "b", "c"} {
		if !s.Ask(name, t1, 0) {
			t.Fatalf("Ask(%s) needs no write", name)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if s.Writes != 1 {
		t.Fatalf("%d writes for three elections, want 1", s.Writes)
	}
	// Within the reserve: no write.
	if s.Ask("a", election.NextTerm(t1, 1), 0) {
		t.Fatal("a term within the reserve asks for a write")
	}
	// A leadership term is written as it is.
	if !s.Ask("a", 0, t1) {
		t.Fatal("a new leadership term needs no write")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Drop("c")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}

	r, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Load("a")
	if a.Term <= election.NextTerm(t1, 1) || a.LeaderTerm != t1 {
		t.Fatalf("after restart a = %+v", a)
	}
	// A dropped name, used again, starts from the floor: never below a
	// token it minted before.
	if c := r.Load("c"); c.Term < t1 {
		t.Fatalf("c starts at %v, below %v", c.Term, t1)
	}
	if n := r.Load("new"); n.Term < s.Durable("b").Term {
		t.Fatalf("a new name starts at %v, below the floor", n.Term)
	}
}

func TestNamedStoreRefusesATamperedFile(t *testing.T) {
	dir := t.TempDir()
	s, _ := OpenNamedStore(dir)
	s.Ask("jobs", election.NextTerm(0, 1), 0)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, namedFile)
	b, _ := os.ReadFile(path)
	b[len(namedHeader)+8] ^= 1 // a digit of the floor
	os.WriteFile(path, b, 0o644)
	if _, err := OpenNamedStore(dir); !errors.Is(err, ErrTermStore) {
		t.Fatalf("tampered file: %v, want ErrTermStore", err)
	}
	os.WriteFile(path, b[:len(b)/2], 0o644)
	if _, err := OpenNamedStore(dir); !errors.Is(err, ErrTermStore) {
		t.Fatalf("torn file: %v, want ErrTermStore", err)
	}
}

// TestNamedStoreFloorCoversDroppedLeaderships: a machine started for a name
// whose record was dropped starts from a term at or above every leadership
// term the dropped records held, across a restart: the core (quorum and
// plain mode) never takes up a leadership of its own at or below its start
// term on another node's word, so a new app on this node never leads at the
// term of an app before it. The floor keeps terms only; it covers the
// leadership terms because a record's term is never below its leadership
// term (the Ask that raises a leadership term raises the term with it).
func TestNamedStoreFloorCoversDroppedLeaderships(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	led := election.NextTerm(election.NextTerm(0, 2), 4) // led through node 4 for an app
	// The leadership term alone, above the term asked before: the term
	// follows it.
	s.Ask("jobs", election.NextTerm(0, 2), 0)
	s.Ask("jobs", 0, led)
	s.Ask("other", election.NextTerm(0, 1), 0)
	s.Drop("jobs")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jobs", "new"} {
		if p := r.Load(name); p.Term < led || r.Holds(name) {
			t.Fatalf("after the drop and a restart, %s starts from %+v (held %v), below the dropped leadership %v", name, p, r.Holds(name), led)
		}
	}
}
