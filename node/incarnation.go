package node

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A node's incarnation tells its peers which of its processes speaks (the
// named elections' Candidacy carries it): a later incarnation means the
// node restarted, however quickly, and voids what its earlier process
// said. So it must grow at every start and revive, whatever the wall clock
// does: the last one is kept in the data dir, and the next is above both it
// and the clock. The file is a hint, not a safety record: a node whose
// file cannot be read or written still starts, from the clock alone (a
// clock stepped back across that restart is then the one case where its
// peers take the new process for the old one's past).

const incarnationFile = "incarnation"

// nextIncarnation returns an incarnation above was and above the one last
// kept in dir ("" keeps nothing), and keeps it there. err says why it could
// not be kept; the incarnation is good to use either way.
func nextIncarnation(dir string, was uint64) (uint64, error) {
	inc := max(uint64(time.Now().UnixNano()), was+1)
	if dir == "" {
		return inc, nil
	}
	var rerr error
	b, err := os.ReadFile(filepath.Join(dir, incarnationFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		rerr = err
	default:
		if last, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			rerr = err
		} else {
			inc = max(inc, last+1)
		}
	}
	if err := writeFileSync(dir, incarnationFile, []byte(strconv.FormatUint(inc, 10)+"\n")); err != nil {
		return inc, errors.Join(rerr, err)
	}
	return inc, rerr
}
