package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// NamedStore persists the terms of every named election in one file, so
// that each election's fencing token never goes back across restarts. It
// keeps the TermStore's reserve (a save writes a term ReserveEpochs ahead,
// so most saves need no I/O), and every save a loop iteration asks for is
// one write (Ask, then Flush): a thousand elections failing over together
// cost one fsync, not a thousand.
//
// An election nobody stands in any more is dropped from the file (Drop), its
// term folded into the floor: every election starts from at least the floor,
// so a name used again never mints a token below one it minted before, and
// the file does not grow with every name ever used.
//
// A Flush appends what changed to a log (namedlog.go) and syncs it once; the
// snapshot, rewritten when the log outgrows it, is the file (elections,
// version 2; version 1, the same without a log, is read too), its last line
// a CRC-32 (IEEE) of the bytes before it, so a torn or edited file is
// refused:
//
//	electord-elections v2
//	floor <term>
//	e <name> <term reserve> <leadership term>
//	...
//	crc32 <8 hex digits>
//
// The version says a log goes with the snapshot: an older electord, which
// would read the snapshot alone and so go back to the terms of the last
// compaction, refuses the file instead.
//
// Owned by the loop goroutine.
type NamedStore struct {
	dir     string // "" keeps the terms in memory only
	durable map[string]Persisted
	floor   election.Term
	next    map[string]Persisted // durable plus what was asked since the last Flush
	nextMin election.Term        // the floor after the next Flush
	// changed: the names whose record in next differs from durable's (or
	// is in only one of them), so that Dirty and Flush cost what changed,
	// not every election: a loop pass asks for a Flush whether or not it
	// moved any term.
	changed map[string]struct{}
	// compact: the next Flush writes a snapshot and starts an empty log,
	// instead of appending (no log yet; or the log may end in bytes of a
	// write that failed, which a block after them would make unreadable).
	compact bool
	// logSize and snapSize are the bytes of the log and of the snapshot.
	logSize, snapSize int
	// Writes counts the writes that reached the disk.
	Writes int
}

const (
	namedFile     = "elections"
	namedHeader   = "electord-elections v2"
	namedHeaderV1 = "electord-elections v1"
)

// OpenNamedStore loads dir's named terms (none on a first start). dir ""
// keeps them in memory. A file that cannot be trusted is ErrTermStore.
func OpenNamedStore(dir string) (*NamedStore, error) {
	s := &NamedStore{dir: dir, durable: map[string]Persisted{}}
	if dir != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	s.reset()
	return s, nil
}

// load reads the snapshot, then replays the log over it.
func (s *NamedStore) load() error {
	b, err := os.ReadFile(filepath.Join(s.dir, namedFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrTermStore, namedFile, err)
	default:
		if s.floor, s.durable, err = decodeNamed(b); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrTermStore, filepath.Join(s.dir, namedFile), err)
		}
		s.snapSize = len(b)
	}
	hasSnap := b != nil
	path := filepath.Join(s.dir, namedLogFile)
	b, err = os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.compact = true
	case err == nil && !hasSnap:
		// A log is started only after a snapshot was written: the
		// snapshot was lost, and the log alone could hold lower terms
		// than the elections reached.
		return fmt.Errorf("%w: %s is there but %s is not", ErrTermStore, path, namedFile)
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrTermStore, namedLogFile, err)
	default:
		good, err := replayNamedLog(b, &s.floor, s.durable)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrTermStore, path, err)
		}
		s.logSize, s.compact = good, good < len(b) || good == 0
	}
	return nil
}

func (s *NamedStore) reset() {
	s.next, s.nextMin = make(map[string]Persisted, len(s.durable)), s.floor
	s.changed = map[string]struct{}{}
	for k, v := range s.durable {
		s.next[k] = v
	}
}

// Load is what a new state machine for name starts from: its own record,
// never below the floor.
func (s *NamedStore) Load(name string) Persisted {
	p := s.next[name]
	p.Term = max(p.Term, s.nextMin)
	return p
}

// Holds reports whether the store has a record of name of its own (not
// only the floor).
func (s *NamedStore) Holds(name string) bool {
	_, ok := s.next[name]
	return ok
}

// Ask asks for term and leaderTerm of name to be durable at the next Flush
// (zero leaves a value as it is). It reports whether the Flush must write.
func (s *NamedStore) Ask(name string, term, leaderTerm election.Term) bool {
	s.next[name] = s.Load(name).raised(term, leaderTerm)
	s.note(name)
	return s.Dirty()
}

// note records whether name's record now differs from the durable one.
func (s *NamedStore) note(name string) {
	p, inNext := s.next[name]
	d, inDurable := s.durable[name]
	if inNext != inDurable || p != d {
		s.changed[name] = struct{}{}
	} else {
		delete(s.changed, name)
	}
}

// Drop forgets name, folding its term into the floor (at the next Flush).
func (s *NamedStore) Drop(name string) {
	if p, ok := s.next[name]; ok {
		s.nextMin = max(s.nextMin, p.Term)
		delete(s.next, name)
		s.note(name)
	}
}

// Dirty reports whether a Flush would write.
func (s *NamedStore) Dirty() bool {
	return s.nextMin != s.floor || len(s.changed) > 0
}

// Flush makes everything asked since the last Flush durable, in one write.
// On failure nothing asked is taken as durable; the asks stay pending for
// the next Flush.
func (s *NamedStore) Flush() error {
	if !s.Dirty() {
		return nil
	}
	if s.dir != "" {
		if err := s.write(); err != nil {
			return fmt.Errorf("persisting the terms of %d named elections: %w", len(s.changed), err)
		}
		s.Writes++
	}
	s.floor = s.nextMin
	for k := range s.changed {
		if v, ok := s.next[k]; ok {
			s.durable[k] = v
		} else {
			delete(s.durable, k)
		}
	}
	clear(s.changed)
	return nil
}

// write makes next and nextMin durable: a block appended to the log, or,
// when the log has outgrown the snapshot (or cannot be appended to), a new
// snapshot and an empty log.
func (s *NamedStore) write() error {
	names := make([]string, 0, len(s.changed))
	for k := range s.changed {
		names = append(names, k)
	}
	slices.Sort(names)
	block := encodeNamedBlock(s.nextMin, s.nextMin != s.floor, names, s.next)
	if !s.compact && s.logSize+len(block) <= max(namedLogMinCompact, s.snapSize) {
		if err := appendNamedLog(s.dir, block); err != nil {
			s.compact = true // the log may end in a part of this block
			return err
		}
		s.logSize += len(block)
		return nil
	}
	snap := encodeNamed(s.nextMin, s.next)
	if err := writeFileSync(s.dir, namedFile, snap); err != nil {
		return err
	}
	// The snapshot holds everything now; until the log is emptied, the old
	// log replays over it to the same state (namedlog.go).
	s.snapSize = len(snap)
	head := []byte(namedLogHeader + "\n")
	if err := writeFileSync(s.dir, namedLogFile, head); err != nil {
		s.compact = true
		return err
	}
	s.compact, s.logSize = false, len(head)
	return nil
}

// Durable is what the disk holds for name.
func (s *NamedStore) Durable(name string) Persisted {
	p := s.durable[name]
	p.Term = max(p.Term, s.floor)
	return p
}

func encodeNamed(floor election.Term, m map[string]Persisted) []byte {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nfloor %d\n", namedHeader, uint64(floor))
	for _, k := range names {
		fmt.Fprintf(&b, "e %s %d %d\n", k, uint64(m[k].Term), uint64(m[k].LeaderTerm))
	}
	fmt.Fprintf(&b, "crc32 %08x\n", crc32.ChecksumIEEE(b.Bytes()))
	return b.Bytes()
}

func decodeNamed(b []byte) (election.Term, map[string]Persisted, error) {
	i := bytes.LastIndex(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if i < 0 {
		return 0, nil, errors.New("no checksum line")
	}
	body, sum := b[:i+1], strings.TrimSpace(string(b[i+1:]))
	if sum != fmt.Sprintf("crc32 %08x", crc32.ChecksumIEEE(body)) {
		return 0, nil, fmt.Errorf("checksum %q does not match the contents", shorten(sum))
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	if !sc.Scan() || sc.Text() != namedHeader && sc.Text() != namedHeaderV1 {
		return 0, nil, errors.New("not an electord-elections v1 or v2 file")
	}
	var floor election.Term
	m := map[string]Persisted{}
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "floor" && line == 2:
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, nil, fmt.Errorf("line %d: floor: %w", line, err)
			}
			floor = election.Term(v)
		case len(f) == 4 && f[0] == "e":
			p, err := parseNamedRecord(f)
			if err != nil {
				return 0, nil, fmt.Errorf("line %d: %w", line, err)
			}
			m[f[1]] = p
		default:
			return 0, nil, fmt.Errorf("line %d: unexpected %q", line, shorten(sc.Text()))
		}
	}
	return floor, m, nil
}

// parseNamedRecord reads a record line's fields: e <name> <term> <leadership
// term>, the name valid and the leadership term not above the term.
func parseNamedRecord(f []string) (Persisted, error) {
	if err := named.CheckName(f[1]); err != nil {
		return Persisted{}, err
	}
	t, err1 := strconv.ParseUint(f[2], 10, 64)
	l, err2 := strconv.ParseUint(f[3], 10, 64)
	if err := errors.Join(err1, err2); err != nil || l > t {
		return Persisted{}, fmt.Errorf("bad terms %q %q", f[2], f[3])
	}
	return Persisted{Term: election.Term(t), LeaderTerm: election.Term(l)}, nil
}
