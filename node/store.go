package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/electord/electord/election"
)

// TermStore persists the highest term a node has seen, so a restarted node
// never goes back to an older term. A write goes to a temporary file that is
// fsynced and renamed over the old one, and the directory is fsynced.
//
// An fsync costs about a millisecond, and a ring election raises the term at
// every hop, so writing each term would put an fsync on every hop of the
// critical path. Instead the store writes a reserve: the last term of the
// epoch ReserveEpochs beyond the one asked for. Every term up to the reserve
// is then durable already, and Save returns at once without I/O; a node
// writes about once per ReserveEpochs elections. After a restart the node
// starts from the reserve, above anything it saw, so it still never goes
// back nor mints a term it used before; its next terms just skip ahead.
type TermStore struct {
	dir     string // "" keeps the term in memory only
	durable election.Term
	// Writes counts the writes that reached the disk.
	Writes int
}

// ReserveEpochs is how far ahead of a term the store writes.
const ReserveEpochs = 16

func reserve(t election.Term) election.Term {
	return election.Term((t.Epoch()+ReserveEpochs+1)<<election.SlotBits - 1)
}

const termFile = "term"

// OpenTermStore opens (creating) dir. dir "" keeps the term in memory.
func OpenTermStore(dir string) (*TermStore, error) {
	if dir == "" {
		return &TermStore{}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data-dir: %w", err)
	}
	return &TermStore{dir: dir}, nil
}

// Load returns the persisted term, 0 when there is none.
func (s *TermStore) Load() (election.Term, error) {
	if s.dir == "" {
		return s.durable, nil
	}
	b, err := os.ReadFile(filepath.Join(s.dir, termFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("data-dir: reading the term: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("data-dir: %s holds %q, not a term: %w", filepath.Join(s.dir, termFile), b, err)
	}
	s.durable = election.Term(v)
	return s.durable, nil
}

// Save makes t durable before it returns: at once if the reserve covers it,
// otherwise by writing a new reserve.
func (s *TermStore) Save(t election.Term) error {
	if t <= s.durable {
		return nil
	}
	r := reserve(t)
	if s.dir == "" {
		s.durable = r
		return nil
	}
	if err := s.write(r); err != nil {
		return err
	}
	s.durable = r
	s.Writes++
	return nil
}

func (s *TermStore) write(t election.Term) error {
	tmp, err := os.CreateTemp(s.dir, termFile+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintf(tmp, "%d\n", uint64(t))
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(s.dir, termFile))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("persisting term %d: %w", uint64(t), werr)
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
