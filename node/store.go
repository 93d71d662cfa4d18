package node

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"

	"github.com/electord/electord/election"
)

// TermStore persists the highest term a node has seen, so a restarted node
// never goes back to an older term, and the term of the last leadership it
// knew, which it reports after a restart until it hears of a newer one. A
// write goes to a temporary file that is fsynced and renamed over the old
// one, and the directory is fsynced.
//
// An fsync costs about a millisecond, and a ring election raises the term at
// every hop, so writing each term would put an fsync on every hop of the
// critical path. Instead the store writes a reserve: the last term of the
// epoch ReserveEpochs beyond the one asked for. Every term up to the reserve
// is then durable already, and Save returns at once without I/O; a node
// writes about once per ReserveEpochs elections. After a restart the node
// starts from the reserve, above anything it saw, so it still never goes
// back nor mints a term it used before; its next terms just skip ahead. The
// leadership term is written as it is, once per leadership change, in place
// in a file of its own (leaderfile.go): it is on a handover's critical path,
// and the fencing promise does not rest on it.
//
// The file (version 1) is four lines, the last a CRC-32 (IEEE) of the
// bytes before it, so a torn or edited file is refused, not misread:
//
//	electord-term v1
//	term <reserve>
//	leader <leadership term>
//	crc32 <8 hex digits>
//
// Anything else, including the single decimal number of electord before
// version 1 (which a truncation could not be told from), is refused.
type TermStore struct {
	dir     string // "" keeps the term in memory only
	durable Persisted
	marked  bool // the marker file (version 2) and the leader file are known to exist
	// leaderSeq is the sequence of the leader file's newest slot.
	leaderSeq uint64
	// Writes counts the writes that reached the disk.
	Writes int
}

// Persisted is what a TermStore keeps.
type Persisted struct {
	// Term is the highest term seen (a reserve above it, once written).
	Term election.Term
	// LeaderTerm is the term of the last leadership known; at most Term.
	LeaderTerm election.Term
}

// raised is p with term and leaderTerm made durable: the term as a
// reserve, the leadership term as it is (zero leaves a value as it is).
func (p Persisted) raised(term, leaderTerm election.Term) Persisted {
	if term > p.Term {
		p.Term = reserve(term)
	}
	if leaderTerm > p.LeaderTerm {
		p.LeaderTerm = leaderTerm
		if leaderTerm > p.Term {
			p.Term = reserve(leaderTerm)
		}
	}
	return p
}

// ReserveEpochs is how far ahead of a term the store writes.
const ReserveEpochs = 16

func reserve(t election.Term) election.Term {
	return election.Term((t.Epoch()+ReserveEpochs+1)<<election.SlotBits - 1)
}

const (
	termFile   = "term"
	termHeader = "electord-term v1"
)

// ErrTermStore marks a data dir whose term cannot be trusted: the term file
// is truncated, corrupt, unreadable or in an unknown format, or it is gone
// from a data dir that was used before. The node refuses to start; an
// operator recovers with `electord recover-term` (RecoverTerm).
var ErrTermStore = errors.New("the term store cannot be trusted")

// ErrDataDirUnwritable marks a data dir this process cannot write: a node
// that could not persist its term would lead at terms it might mint again.
var ErrDataDirUnwritable = errors.New("data-dir is not writable")

// markerFile is written in a data dir before its first term: a data dir
// that has it but no term file has lost its term (deleted, or a volume
// swapped under the node). Version 2 also promises a leader file; a dir
// marked by version 1 gets one at its first write.
const (
	markerFile   = "electord.data"
	markerText   = "electord data dir, version 2: the term and leader files beside this one must never be lost\n"
	markerTextV1 = "electord data dir, version 1: the term file beside this one must never be lost\n"
)

// OpenTermStore opens (creating) dir and checks that this process can write
// it (ErrDataDirUnwritable). dir "" keeps the term in memory.
func OpenTermStore(dir string) (*TermStore, error) {
	if dir == "" {
		return &TermStore{}, nil
	}
	unwritable := func(err error) error {
		return fmt.Errorf("%w: %s (uid %d): %w", ErrDataDirUnwritable, dir, os.Getuid(), err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, unwritable(err)
	}
	probe, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return nil, unwritable(err)
	}
	_, err = probe.WriteString("probe\n")
	if err == nil {
		err = probe.Sync()
	}
	probe.Close()
	os.Remove(probe.Name())
	if err != nil {
		return nil, unwritable(err)
	}
	return &TermStore{dir: dir}, nil
}

// Load returns what was persisted, zero on a first start. A term file that
// cannot be trusted, or a used data dir without one, is ErrTermStore.
func (s *TermStore) Load() (Persisted, error) {
	if s.dir == "" {
		return s.durable, nil
	}
	path := filepath.Join(s.dir, termFile)
	marker := filepath.Join(s.dir, markerFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, merr := os.Stat(marker); merr == nil {
			return Persisted{}, fmt.Errorf("%w: %s was used before (%s exists) but %s is gone; "+
				"find the highest term the cluster used and run: electord recover-term --data-dir %s --at-least TERM",
				ErrTermStore, s.dir, markerFile, termFile, s.dir)
		}
		return Persisted{}, nil // a first start
	}
	if err != nil {
		return Persisted{}, fmt.Errorf("%w: reading %s: %w", ErrTermStore, path, err)
	}
	p, err := decodeTerms(b)
	if err != nil {
		return Persisted{}, fmt.Errorf("%w: %s: %w; if the cluster's highest term is known, run: electord recover-term --data-dir %s --at-least TERM",
			ErrTermStore, path, err, s.dir)
	}
	mark, _ := os.ReadFile(marker)
	lpath := filepath.Join(s.dir, leaderFile)
	slot, err := readLeaderFile(s.dir)
	switch {
	case errors.Is(err, errNoLeaderFile):
		if string(mark) == markerText {
			return Persisted{}, fmt.Errorf("%w: %s is gone from %s (its %s promises one); "+
				"find the highest term the cluster used and run: electord recover-term --data-dir %s --at-least TERM",
				ErrTermStore, leaderFile, s.dir, markerFile, s.dir)
		}
	case err != nil:
		return Persisted{}, fmt.Errorf("%w: %s: %w; run: electord recover-term --data-dir %s --at-least TERM",
			ErrTermStore, lpath, err, s.dir)
	case slot.term > p.Term:
		return Persisted{}, fmt.Errorf("%w: %s: inconsistent: leader term %v above the term file's %v; run: electord recover-term --data-dir %s --at-least TERM",
			ErrTermStore, lpath, slot.term, p.Term, s.dir)
	default:
		p.LeaderTerm = max(p.LeaderTerm, slot.term)
		s.leaderSeq, s.marked = slot.seq, string(mark) == markerText
	}
	s.durable = p
	return p, nil
}

// Volatile reports whether the store keeps the term in memory only (no
// data dir, or none at all): nothing it holds outlives the process.
func (s *TermStore) Volatile() bool { return s == nil || s.dir == "" }

// Durable is what the last successful Load or Save made durable.
func (s *TermStore) Durable() Persisted { return s.durable }

// RecoverTerm rewrites the term file of dir so that the node starts at a
// term of at least atLeast: the operator's way out of ErrTermStore. It can
// only raise what a readable file held; a missing or unreadable one is
// replaced. The leader file is kept when its checksum holds and it agrees
// with what is left: at most a readable term file's term (above it, Load
// calls it inconsistent), within the range a node starts with when the term
// file is the damaged one. Its leadership term is a term the node saw, so
// the new term is at least that term too, even above atLeast: terms never
// go back, and the node reports that leadership after the repair instead of
// 0. A leader file that cannot be trusted is replaced, and the leadership
// term is what a readable term file held, else 0 until the node hears of a
// leader. It returns what was there (the term zero if unreadable, the
// leadership term of either file) and what is there now.
func RecoverTerm(dir string, atLeast election.Term) (old, now Persisted, err error) {
	if dir == "" {
		return old, now, errors.New("recover-term: --data-dir is required")
	}
	if atLeast.Epoch() > election.MaxConfigEpoch {
		return old, now, fmt.Errorf("recover-term: %v: %w", atLeast, election.ErrTermRange)
	}
	s, err := OpenTermStore(dir)
	if err != nil {
		return old, now, err
	}
	termOK := false
	if b, rerr := os.ReadFile(filepath.Join(dir, termFile)); rerr == nil {
		if p, derr := decodeTerms(b); derr == nil {
			old, termOK = p, true
		}
	}
	if slot, err := readLeaderFile(dir); err == nil {
		if termOK && slot.term <= old.Term || !termOK && slot.term.Epoch() <= election.MaxConfigEpoch {
			old.LeaderTerm = max(old.LeaderTerm, slot.term)
		}
	}
	now = Persisted{Term: max(old.Term, old.LeaderTerm, atLeast), LeaderTerm: old.LeaderTerm}
	// write makes a new leader file first (it may be the damaged one) and
	// marks the dir afresh. It holds the leadership term kept, which is on
	// disk already and at most the term file's term whenever that file is
	// readable, so a crash at any step leaves a dir that loads or that
	// recover-term repairs to the same result.
	s.durable = old
	if err := s.write(now); err != nil {
		return old, now, err
	}
	return old, now, nil
}

func encodeTerms(p Persisted) []byte {
	body := fmt.Sprintf("%s\nterm %d\nleader %d\n", termHeader, uint64(p.Term), uint64(p.LeaderTerm))
	return fmt.Appendf(nil, "%scrc32 %08x\n", body, crc32.ChecksumIEEE([]byte(body)))
}

func decodeTerms(b []byte) (Persisted, error) {
	text := string(b)
	if !strings.HasPrefix(text, termHeader+"\n") {
		return Persisted{}, fmt.Errorf("holds %q: not a %q file (a term file of an older electord, or damaged)", shorten(text), termHeader)
	}
	i := strings.LastIndex(strings.TrimSuffix(text, "\n"), "\n") + 1
	body, last := text[:i], strings.TrimSpace(text[i:])
	var sum uint32
	if _, err := fmt.Sscanf(last, "crc32 %08x", &sum); err != nil || !strings.HasSuffix(text, "\n") {
		return Persisted{}, fmt.Errorf("truncated: the last line is %q, not \"crc32 <hex>\"", shorten(last))
	}
	if got := crc32.ChecksumIEEE([]byte(body)); got != sum {
		return Persisted{}, fmt.Errorf("corrupt: checksum %08x, the file says %08x", got, sum)
	}
	var p Persisted
	var term, leader uint64
	if _, err := fmt.Sscanf(body, termHeader+"\nterm %d\nleader %d\n", &term, &leader); err != nil {
		return Persisted{}, fmt.Errorf("malformed: %w", err)
	}
	p.Term, p.LeaderTerm = election.Term(term), election.Term(leader)
	if p.LeaderTerm > p.Term {
		return Persisted{}, fmt.Errorf("inconsistent: leader term %v above term %v", p.LeaderTerm, p.Term)
	}
	return p, nil
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Save makes term and leaderTerm durable before it returns: at once if the
// reserve covers term and leaderTerm is the one written, otherwise by
// writing the file. Zero leaves a value as it is.
func (s *TermStore) Save(term, leaderTerm election.Term) error {
	next := s.durable.raised(term, leaderTerm)
	if next == s.durable {
		return nil
	}
	if s.dir == "" {
		s.durable = next
		return nil
	}
	var err error
	if next.Term == s.durable.Term && s.marked {
		err = s.writeLeader(next.LeaderTerm)
	} else {
		err = s.write(next)
	}
	if err != nil {
		// The next try goes the full way: a new leader file, marker and
		// term file, whatever the failure left of them.
		s.marked = false
		return err
	}
	s.durable = next
	s.Writes++
	return nil
}

// write writes p to the term file, the full way. If this store has not
// marked the dir yet (or a write failed), a new leader file comes first and the version 2
// marker last, so a missing term or leader file is from then on a lost one.
// In that order a crash at any step leaves a dir that starts: before the
// term file, a first start; after it, a dir whose marker the next write
// adds. (The marker once came first: a SIGKILL between it and the term file
// left a dir refused for good as one that lost its term.)
func (s *TermStore) write(p Persisted) error {
	if !s.marked {
		// The leader file anew, holding the durable leadership term (at
		// most the durable term, which the term file on disk holds): after
		// a failed write, the old file's newest slot may be the only copy
		// of it.
		if err := createLeaderFile(s.dir, s.durable.LeaderTerm); err != nil {
			return fmt.Errorf("creating the leadership term's file (%s): %w", leaderFile, err)
		}
		s.leaderSeq = 1
	}
	if err := writeFileSync(s.dir, termFile, encodeTerms(p)); err != nil {
		return fmt.Errorf("persisting term %v (leader term %v): %w", p.Term, p.LeaderTerm, err)
	}
	if !s.marked {
		if err := writeFileSync(s.dir, markerFile, []byte(markerText)); err != nil {
			return fmt.Errorf("marking the data dir used (%s): %w", markerFile, err)
		}
		s.marked = true
	}
	return nil
}

// writeLeader writes a new leadership term within the term file's reserve:
// in place, one slot of the leader file.
func (s *TermStore) writeLeader(t election.Term) error {
	next := leaderSlot{seq: s.leaderSeq + 1, term: t}
	if err := writeLeaderSlot(s.dir, next); err != nil {
		return fmt.Errorf("persisting leader term %v: %w", t, err)
	}
	s.leaderSeq = next.seq
	return nil
}

// writeFileSync replaces dir/name with b durably: a temporary file written
// and fsynced, renamed over name, then the directory fsynced.
func writeFileSync(dir, name string, b []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return werr
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
