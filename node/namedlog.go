package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// The named store's log: each Flush appends what changed since the last one
// as a block, and syncs the file's data once, so a Flush costs what changed
// (a failover of a few elections among thousands writes a few lines), not a
// rewrite of every election's record. The snapshot (namedFile) holds the
// state as of the last compaction; the log, replayed over it in order, the
// rest. When the log outgrows the snapshot, a Flush writes a new snapshot
// and starts an empty log.
//
// The log (version 1): a header line, then blocks, each the lines of one
// Flush followed by a CRC-32 (IEEE) of those lines' bytes:
//
//	electord-elections-log v1
//	floor <term>
//	e <name> <term reserve> <leadership term>
//	d <name>
//	crc32 <8 hex digits>
//	...
//
// "e" sets a record, "d" drops one, "floor" raises the floor. A block counts
// only with its checksum line whole and matching. A last block cut short
// (no whole checksum line after it) is a write that never returned: its
// Flush failed, or the process died in it, so nothing it held was shown, and
// it is left out. A whole checksum line that does not match is damage or an
// edit: the file is refused, as a damaged snapshot is, and so is a log
// without its snapshot (a log is started only after a snapshot is written).
//
// Replaying a log over a snapshot taken after some of its blocks (a
// compaction that wrote the snapshot and died before it emptied the log)
// gives the snapshot again: records only rise (Ask), the floor only rises,
// and a dropped record comes back only through a later block's "e".

const (
	namedLogFile   = "elections.log"
	namedLogHeader = "electord-elections-log v1"
	// namedLogMinCompact: the log is compacted into a new snapshot when it
	// is larger than the snapshot and than this, so that a small store does
	// not rewrite its snapshot every few flushes.
	namedLogMinCompact = 64 << 10
)

// encodeNamedBlock is one Flush's block: the floor if it rose, then each
// changed name's record or its drop, in the order given.
func encodeNamedBlock(floor election.Term, setFloor bool, names []string, next map[string]Persisted) []byte {
	var b bytes.Buffer
	if setFloor {
		fmt.Fprintf(&b, "floor %d\n", uint64(floor))
	}
	for _, k := range names {
		if p, ok := next[k]; ok {
			fmt.Fprintf(&b, "e %s %d %d\n", k, uint64(p.Term), uint64(p.LeaderTerm))
		} else {
			fmt.Fprintf(&b, "d %s\n", k)
		}
	}
	fmt.Fprintf(&b, "crc32 %08x\n", crc32.ChecksumIEEE(b.Bytes()))
	return b.Bytes()
}

// replayNamedLog applies the blocks of log b to floor and m, in order. It
// returns the length of the prefix it applied: shorter than b when the last
// block was cut short (left out, see above). A damaged block, header or
// record is an error naming its byte offset.
func replayNamedLog(b []byte, floor *election.Term, m map[string]Persisted) (int, error) {
	head := namedLogHeader + "\n"
	if !bytes.HasPrefix(b, []byte(head)) {
		if len(b) < len(head) && bytes.HasPrefix([]byte(head), b) {
			return 0, nil // the header's own write was cut short
		}
		return 0, errors.New("not an electord-elections-log v1 file")
	}
	good := len(head)
	for good < len(b) {
		rest := b[good:]
		end := -1 // the end of this block's checksum line
		var sumAt int
		for at := 0; at < len(rest); {
			nl := bytes.IndexByte(rest[at:], '\n')
			if nl < 0 {
				break // a line cut short: the block's write never ended
			}
			if bytes.HasPrefix(rest[at:], []byte("crc32 ")) {
				sumAt, end = at, at+nl+1
				break
			}
			at += nl + 1
		}
		if end < 0 {
			return good, nil
		}
		body := rest[:sumAt]
		if sum := string(rest[sumAt : end-1]); sum != fmt.Sprintf("crc32 %08x", crc32.ChecksumIEEE(body)) {
			return 0, fmt.Errorf("block at byte %d: checksum %q does not match its contents", good, shorten(sum))
		}
		if err := applyNamedBlock(body, floor, m); err != nil {
			return 0, fmt.Errorf("block at byte %d: %w", good, err)
		}
		good += end
	}
	return good, nil
}

// applyNamedBlock applies one block's records (checksum already checked).
func applyNamedBlock(body []byte, floor *election.Term, m map[string]Persisted) error {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "floor":
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			*floor = max(*floor, election.Term(v))
		case len(f) == 4 && f[0] == "e":
			r, err := parseNamedRecord(f)
			if err != nil {
				return err
			}
			p := m[f[1]]
			m[f[1]] = Persisted{Term: max(p.Term, r.Term), LeaderTerm: max(p.LeaderTerm, r.LeaderTerm)}
		case len(f) == 2 && f[0] == "d":
			if err := named.CheckName(f[1]); err != nil {
				return err
			}
			delete(m, f[1])
		default:
			return fmt.Errorf("unexpected %q", shorten(sc.Text()))
		}
	}
	return nil
}

// appendNamedLog appends block to dir's log and syncs its data; it returns
// once the block is durable.
func appendNamedLog(dir string, block []byte) error {
	f, err := os.OpenFile(filepath.Join(dir, namedLogFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write(block)
	if werr == nil {
		werr = datasync(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
