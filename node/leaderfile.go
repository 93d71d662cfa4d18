package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/electord/electord/election"
)

// The leadership term is written once per leadership change, on the
// handover's critical path: the term file's write, fsync, rename and
// directory fsync cost 1.7-3.4 ms on this project's disk, the leadership
// term's own file one fdatasync of a block written in place (0.1-0.6 ms).
// The fencing promise does not rest on it: every term a node can mint is
// covered by the term file's reserve, written the full way. The leadership
// term only makes a restarted node report the last leadership it knew.
//
// The file (version 1) holds two slots, at offsets 0 and leaderSlotGap (in
// different pages and sectors). A write goes to the slot the last write did
// not use, so a torn write spoils at most the slot being written and the
// other still holds the previous value. Each slot is 32 bytes:
//
//	magic "ELDRv1\x00\x00" | sequence (uint64, big endian) | leadership term
//	(uint64) | CRC-32 (IEEE) of the 24 bytes before | 4 zero bytes
//
// Load takes the valid slot with the higher sequence. A file with neither
// slot valid, or a slot above the term file's reserve, is refused
// (ErrTermStore) like a damaged term file.
const (
	leaderFile    = "leader"
	leaderSlotGap = 4096
	leaderSlotLen = 32
	leaderMagic   = "ELDRv1\x00\x00"
)

type leaderSlot struct {
	seq  uint64
	term election.Term
}

func encodeLeaderSlot(s leaderSlot) []byte {
	b := make([]byte, leaderSlotLen)
	copy(b, leaderMagic)
	binary.BigEndian.PutUint64(b[8:], s.seq)
	binary.BigEndian.PutUint64(b[16:], uint64(s.term))
	binary.BigEndian.PutUint32(b[24:], crc32.ChecksumIEEE(b[:24]))
	return b
}

func decodeLeaderSlot(b []byte) (leaderSlot, bool) {
	if len(b) < leaderSlotLen || string(b[:8]) != leaderMagic ||
		crc32.ChecksumIEEE(b[:24]) != binary.BigEndian.Uint32(b[24:]) {
		return leaderSlot{}, false
	}
	return leaderSlot{seq: binary.BigEndian.Uint64(b[8:]), term: election.Term(binary.BigEndian.Uint64(b[16:]))}, true
}

// errNoLeaderFile: the data dir has no leadership term file (yet).
var errNoLeaderFile = errors.New("no leader file")

// readLeaderFile returns the newest valid slot of dir's leader file.
func readLeaderFile(dir string) (leaderSlot, error) {
	b, err := os.ReadFile(filepath.Join(dir, leaderFile))
	if errors.Is(err, os.ErrNotExist) {
		return leaderSlot{}, errNoLeaderFile
	}
	if err != nil {
		return leaderSlot{}, err
	}
	if len(b) != leaderSlotGap+leaderSlotLen {
		return leaderSlot{}, fmt.Errorf("holds %d bytes, not %d: truncated or not a leader file", len(b), leaderSlotGap+leaderSlotLen)
	}
	a, aok := decodeLeaderSlot(b[:leaderSlotLen])
	c, cok := decodeLeaderSlot(b[leaderSlotGap:])
	switch {
	case aok && cok:
		if c.seq > a.seq {
			return c, nil
		}
		return a, nil
	case aok:
		return a, nil
	case cok:
		return c, nil
	}
	return leaderSlot{}, errors.New("corrupt: neither slot's checksum holds")
}

// createLeaderFile writes a new leader file holding term in both slots, the
// full way (write, fsync, rename, fsync of the directory).
func createLeaderFile(dir string, term election.Term) error {
	b := make([]byte, leaderSlotGap+leaderSlotLen)
	s := encodeLeaderSlot(leaderSlot{seq: 1, term: term})
	copy(b, s)
	copy(b[leaderSlotGap:], s)
	return writeFileSync(dir, leaderFile, b)
}

// writeLeaderSlot writes s over the slot its sequence selects, in place,
// and waits for the data to reach the disk. The file's size never changes,
// so no metadata has to follow.
func writeLeaderSlot(dir string, s leaderSlot) error {
	f, err := os.OpenFile(filepath.Join(dir, leaderFile), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(encodeLeaderSlot(s), int64(s.seq%2)*leaderSlotGap)
	if werr == nil {
		werr = datasync(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
