package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

func savedStore(t *testing.T) (string, Persisted) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenTermStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); err != nil { // a first start: marks the dir
		t.Fatal(err)
	}
	if err := s.Save(election.Term(69<<election.SlotBits|3), election.Term(68<<election.SlotBits|3)); err != nil {
		t.Fatal(err)
	}
	return dir, s.Durable()
}

func load(dir string) (Persisted, error) {
	s, err := OpenTermStore(dir)
	if err != nil {
		return Persisted{}, err
	}
	return s.Load()
}

// Every way a term file can be damaged stops the start with ErrTermStore and
// a message that names the file and the way out (issue 11: a truncated
// "4521983" read as "452" made a node that led at 58.3 lead at 1.3).
func TestTermStoreRefusesWhatItCannotTrust(t *testing.T) {
	dir, want := savedStore(t)
	path := filepath.Join(dir, termFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := load(dir); err != nil || got != want {
		t.Fatalf("intact file: %+v, %v; want %+v", got, err, want)
	}
	cases := map[string][]byte{
		"truncated":           good[:len(good)/2],
		"cut before its end":  good[:len(good)-1],
		"empty":               {},
		"a digit changed":     flipDigit(good),
		"the old format":      []byte("4521983\n"),
		"the old, truncated":  []byte("452"),
		"garbage":             []byte("\x00\x01\x02"),
		"leader above term":   encodeTerms(Persisted{Term: 5 << election.SlotBits, LeaderTerm: 6 << election.SlotBits}),
		"checksum line wrong": []byte(strings.Replace(string(good), "crc32 ", "crc32 0", 1)),
	}
	for name, b := range cases {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := load(dir)
		if !errors.Is(err, ErrTermStore) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "recover-term") {
			t.Errorf("%s: %v; want ErrTermStore naming %s and recover-term", name, err, path)
		}
	}
	// A used data dir that lost its term file is refused too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := load(dir); !errors.Is(err, ErrTermStore) || !strings.Contains(err.Error(), "gone") {
		t.Errorf("lost term file: %v; want ErrTermStore", err)
	}
	// A fresh dir is a first start, again and again until a term is kept.
	fresh := t.TempDir()
	for range 2 {
		if got, err := load(fresh); err != nil || got != (Persisted{}) {
			t.Fatalf("fresh dir: %+v, %v", got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(fresh, markerFile)); err == nil {
		t.Fatal("a dir that kept no term is marked used")
	}
}

// recover-term only raises: from a damaged file to the operator's term,
// from a readable one to the higher of the two.
func TestRecoverTermOnlyRaises(t *testing.T) {
	dir, before := savedStore(t)
	low := election.Term(3 << election.SlotBits)
	old, now, err := RecoverTerm(dir, low)
	if err != nil || old != before || now != before {
		t.Fatalf("recover below the saved term: old %+v now %+v (%v); want both %+v", old, now, err, before)
	}
	if err := os.WriteFile(filepath.Join(dir, termFile), []byte("45"), 0o644); err != nil {
		t.Fatal(err)
	}
	high := election.Term(100 << election.SlotBits)
	if _, now, err = RecoverTerm(dir, high); err != nil || now.Term != high {
		t.Fatalf("recover a damaged file: %+v, %v", now, err)
	}
	got, err := load(dir)
	if err != nil || got.Term != high {
		t.Fatalf("after recover-term: %+v, %v; want term %v", got, err, high)
	}
	if _, _, err := RecoverTerm(dir, election.Term(uint64(1<<47)<<election.SlotBits)); !errors.Is(err, election.ErrTermRange) {
		t.Fatalf("recover-term beyond the range: %v", err)
	}
}

// flipDigit changes the first digit of the term line.
func flipDigit(b []byte) []byte {
	out := append([]byte(nil), b...)
	i := strings.Index(string(out), "\nterm ") + len("\nterm ")
	out[i] = '0' + (out[i]-'0'+1)%10
	return out
}
