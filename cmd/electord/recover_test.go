package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// electord recover-term on a data dir whose term file is damaged and whose
// leader file is intact keeps the leader file's leadership term: the term
// it writes is at least that term, even below it on --at-least, and the
// node reports that leadership after the repair, not 0.
func TestRecoverTermKeepsAnIntactLeaderFile(t *testing.T) {
	dir := t.TempDir()
	s, err := node.OpenTermStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	lt := election.Term(80<<election.SlotBits | 2)
	if err := s.Save(election.Term(69<<election.SlotBits|3), election.Term(68<<election.SlotBits|3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(0, lt); err != nil { // the leader file only, in place
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "term"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"--id", "1", "--data-dir", dir, "--peer-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--log-level", "error"}, &out, &errb)
	if code != exitTerm || !strings.Contains(errb.String(), "recover-term") {
		t.Fatalf("start with a damaged term file: exit %d, stderr:\n%s\nwant exit 3 naming recover-term", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	code = run([]string{"recover-term", "--data-dir", dir, "--at-least", "3.0"}, &out, &errb)
	want := dir + ": term 80.2 (was 0.0), last leadership 80.2; the term is raised above --at-least 3.0 to the leadership term the leader file kept\n"
	if code != exitOK || out.String() != want {
		t.Fatalf("recover-term: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and %q", code, out.String(), errb.String(), want)
	}
	s, err = node.OpenTermStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(); err != nil || got != (node.Persisted{Term: lt, LeaderTerm: lt}) {
		t.Fatalf("after recover-term: %+v, %v; want term and leader term %v", got, err, lt)
	}
}
