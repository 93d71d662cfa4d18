package node

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

// storeWith opens a store in dir and flushes n elections (e-0000 ...) at
// term t.
func storeWith(t testing.TB, dir string, n int, term election.Term) *NamedStore {
	t.Helper()
	s, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		s.Ask(fmt.Sprintf("e-%04d", i), term, 0)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func readFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reopened opens dir again and checks that it holds what s holds as
// durable, for every name s knows and for a new name (the floor).
func reopened(t *testing.T, dir string, s *NamedStore) *NamedStore {
	t.Helper()
	r, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.floor != s.floor || len(r.durable) != len(s.durable) {
		t.Fatalf("reopened: floor %v and %d records, want %v and %d", r.floor, len(r.durable), s.floor, len(s.durable))
	}
	for k, v := range s.durable {
		if r.durable[k] != v {
			t.Fatalf("reopened: %s = %+v, want %+v", k, r.durable[k], v)
		}
	}
	return r
}

// A Flush writes what changed, not every election: with 1,000 elections on
// disk, one leadership change appends one line to the log and leaves the
// snapshot as it was; a restart reads both.
func TestNamedStoreAppendsWhatChanged(t *testing.T) {
	dir := t.TempDir()
	t1 := election.NextTerm(0, 1)
	s := storeWith(t, dir, 1000, t1)
	snap, log := readFile(t, dir, namedFile), readFile(t, dir, namedLogFile)
	if !bytes.HasPrefix(snap, []byte(namedHeader+"\n")) || string(log) != namedLogHeader+"\n" {
		t.Fatalf("after the first flush: snapshot %q..., log %q", snap[:30], log)
	}
	s.Ask("e-0007", 0, t1)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, namedFile); !bytes.Equal(got, snap) {
		t.Fatal("one election's change rewrote the snapshot")
	}
	block := readFile(t, dir, namedLogFile)[len(log):]
	if lines := strings.Count(string(block), "\n"); lines != 2 || !strings.HasPrefix(string(block), "e e-0007 ") {
		t.Fatalf("one change appended %q, want its record and a checksum", block)
	}
	s.Drop("e-0008")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	r := reopened(t, dir, s)
	if p := r.Load("e-0007"); p.LeaderTerm != t1 {
		t.Fatalf("e-0007 after restart: %+v", p)
	}
	if r.Holds("e-0008") || r.Load("e-0008").Term < t1 {
		t.Fatalf("a dropped name after restart: held %v, starts at %v", r.Holds("e-0008"), r.Load("e-0008").Term)
	}
}

// A last block cut short is a Flush that never returned: left out, and the
// next Flush starts the log again (a block after the torn bytes would make
// it unreadable).
func TestNamedStoreLeavesATornBlockOut(t *testing.T) {
	dir := t.TempDir()
	t1 := election.NextTerm(0, 1)
	s := storeWith(t, dir, 3, t1)
	s.Ask("e-0001", 0, t1)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, dir, namedLogFile)
	want := reopened(t, dir, s)
	s.Ask("e-0002", 0, t1)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	whole := readFile(t, dir, namedLogFile)
	for cut := len(before) + 1; cut < len(whole); cut++ {
		os.WriteFile(filepath.Join(dir, namedLogFile), whole[:cut], 0o644)
		r := reopened(t, dir, want)
		if r.Load("e-0002").LeaderTerm != 0 {
			t.Fatalf("cut at %d: the torn block's leadership term was taken", cut)
		}
		if !r.compact {
			t.Fatalf("cut at %d: the next flush would append after torn bytes", cut)
		}
	}
	// The next Flush compacts; the store reads back whole.
	r, _ := OpenNamedStore(dir)
	r.Ask("e-0002", 0, t1)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, dir, namedLogFile)); got != namedLogHeader+"\n" {
		t.Fatalf("log after the flush that follows a torn block: %q", got)
	}
	if p := reopened(t, dir, r).Load("e-0002"); p.LeaderTerm != t1 {
		t.Fatalf("e-0002 = %+v", p)
	}
}

// A block whose checksum line is whole but does not match, or a damaged
// header, is refused, naming where.
func TestNamedStoreRefusesADamagedLog(t *testing.T) {
	dir := t.TempDir()
	t1 := election.NextTerm(0, 1)
	s := storeWith(t, dir, 3, t1)
	for _, k := range []string{"e-0000", "e-0001"} {
		s.Ask(k, 0, t1)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, namedLogFile)
	good := readFile(t, dir, namedLogFile)
	i := bytes.Index(good, []byte("e e-0000 ")) + len("e e-0000 ")
	bad := bytes.Clone(good)
	bad[i] ^= 1 // a digit of the first block's term
	os.WriteFile(path, bad, 0o644)
	_, err := OpenNamedStore(dir)
	if !errors.Is(err, ErrTermStore) || !strings.Contains(err.Error(), fmt.Sprintf("block at byte %d", len(namedLogHeader)+1)) {
		t.Fatalf("damaged block: %v, want ErrTermStore naming its offset", err)
	}
	bad = bytes.Clone(good)
	bad[3] = 'X'
	os.WriteFile(path, bad, 0o644)
	if _, err := OpenNamedStore(dir); !errors.Is(err, ErrTermStore) {
		t.Fatalf("damaged header: %v, want ErrTermStore", err)
	}
	// A log without its snapshot: the snapshot was lost.
	os.WriteFile(path, good, 0o644)
	os.Remove(filepath.Join(dir, namedFile))
	if _, err := OpenNamedStore(dir); !errors.Is(err, ErrTermStore) || !strings.Contains(err.Error(), "is not") {
		t.Fatalf("log without snapshot: %v, want ErrTermStore naming the missing snapshot", err)
	}
}

// The log is folded into a new snapshot once it outgrows it, so the files
// stay in proportion to the elections; a compaction that died between the
// snapshot and the log's reset reads back the same.
func TestNamedStoreCompacts(t *testing.T) {
	dir := t.TempDir()
	t1 := election.NextTerm(0, 1)
	s := storeWith(t, dir, 10, t1)
	lt := t1
	flush := func(i int) {
		lt++
		s.Ask(fmt.Sprintf("e-%04d", i%10), 0, lt)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if s.logSize > namedLogMinCompact {
			t.Fatalf("log at %d bytes after %d flushes", s.logSize, i+1)
		}
	}
	var old []byte
	for i := 0; old == nil; i++ {
		if i == 2000 {
			t.Fatal("2,000 flushes never compacted the log")
		}
		log := readFile(t, dir, namedLogFile)
		flush(i)
		if s.logSize < len(log) {
			old = log // the log as it was before this compaction
		}
	}
	reopened(t, dir, s)
	// Died after the snapshot, before the log's reset: the old log replays
	// over the new snapshot to the same state.
	os.WriteFile(filepath.Join(dir, namedLogFile), old, 0o644)
	if r := reopened(t, dir, s); r.logSize != len(old) {
		t.Fatalf("reopened log size %d, want %d (its next flush compacts by size)", r.logSize, len(old))
	}
	for i := range 3000 {
		flush(i)
	}
	reopened(t, dir, s)
}

// A Flush whose append fails takes nothing as durable, and the next one
// writes a snapshot; a data dir of an older electord (a version 1 snapshot,
// no log) is read, and written on as version 2.
func TestNamedStoreAfterAFailedAppendAndFromVersion1(t *testing.T) {
	dir := t.TempDir()
	t1 := election.NextTerm(0, 1)
	body := fmt.Sprintf("%s\nfloor 0\ne jobs %d 0\n", namedHeaderV1, uint64(t1))
	v1 := body + fmt.Sprintf("crc32 %08x\n", crc32.ChecksumIEEE([]byte(body)))
	os.WriteFile(filepath.Join(dir, namedFile), []byte(v1), 0o644)
	s, err := OpenNamedStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Load("jobs"); p.Term != t1 {
		t.Fatalf("from version 1: jobs = %+v", p)
	}
	s.Ask("jobs", 0, t1)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(readFile(t, dir, namedFile), []byte(namedHeader+"\n")) {
		t.Fatal("the first flush after version 1 did not write a version 2 snapshot")
	}
	// The log cannot be appended to (a directory in its place).
	path := filepath.Join(dir, namedLogFile)
	os.Remove(path)
	os.Mkdir(path, 0o755)
	s.Ask("jobs", 0, election.Term(uint64(t1)+1))
	if err := s.Flush(); err == nil {
		t.Fatal("a flush whose append failed succeeded")
	}
	if s.Durable("jobs").LeaderTerm != t1 {
		t.Fatal("a failed flush was taken as durable")
	}
	os.Remove(path)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := reopened(t, dir, s).Load("jobs"); p.LeaderTerm != election.Term(uint64(t1)+1) {
		t.Fatalf("after the failed append and a good flush: %+v", p)
	}
}

// BenchmarkNamedStoreFlushOne is one election's leadership change among N
// on disk: the log's append (Flush), against the whole-file rewrite each
// Flush did before the log (the snapshot's encoding and durable write).
func BenchmarkNamedStoreFlushOne(b *testing.B) {
	for _, n := range []int{100, 10000} {
		for _, mode := range []string{"append", "rewrite"} {
			b.Run(fmt.Sprintf("%s-%d", mode, n), func(b *testing.B) {
				dir := b.TempDir()
				t1 := election.NextTerm(0, 1)
				s := storeWith(b, dir, n, t1)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					lt := election.Term(uint64(t1) + uint64(i+1))
					s.Ask("e-0042", 0, lt)
					if mode == "rewrite" {
						if err := writeFileSync(dir, namedFile, encodeNamed(s.nextMin, s.next)); err != nil {
							b.Fatal(err)
						}
						continue
					}
					if err := s.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A block's bytes are the format the log's comment gives (a restart of any
// version reads them): the floor when it rose, each record or drop in the
// order given, and the checksum of the lines before it in eight lower-case
// hex digits.
func TestNamedBlockIsTheDocumentedFormat(t *testing.T) {
	next := map[string]Persisted{"shard-1": {Term: 42, LeaderTerm: 41}, "shard-2": {Term: 1 << 40}}
	lines := "floor 7\ne shard-1 42 41\nd gone\ne shard-2 1099511627776 0\n"
	want := lines + fmt.Sprintf("crc32 %08x\n", crc32.ChecksumIEEE([]byte(lines)))
	if got := string(encodeNamedBlock(7, true, []string{"shard-1", "gone", "shard-2"}, next)); got != want {
		t.Fatalf("block:\n%s\nwant:\n%s", got, want)
	}
	lines = "d gone\n"
	want = lines + fmt.Sprintf("crc32 %08x\n", crc32.ChecksumIEEE([]byte(lines)))
	if got := string(encodeNamedBlock(7, false, []string{"gone"}, next)); got != want {
		t.Fatalf("block without the floor:\n%s\nwant:\n%s", got, want)
	}
}
