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
type TermStore struct {
	dir string // "" keeps the term in memory only
	mem election.Term
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
		return s.mem, nil
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
	return election.Term(v), nil
}

// Save persists t durably before it returns.
func (s *TermStore) Save(t election.Term) error {
	if s.dir == "" {
		s.mem = t
		return nil
	}
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
