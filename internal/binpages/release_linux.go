package binpages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release advises the kernel that the read-only mappings of the running
// executable are not needed (madvise MADV_DONTNEED), which unmaps their
// pages from this process. Only private mappings without write permission
// are released: for a private mapping DONTNEED drops written pages too, and
// the writable data segment holds the program's variables. The executable
// is recognised by device and inode, not by path, so a binary replaced on
// disk since the start is still found.
func Release() (Stats, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return Stats{}, fmt.Errorf("binpages: stat /proc/self/exe: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return Stats{}, fmt.Errorf("binpages: %w", err)
	}
	defer f.Close()
	ms, err := readOnlyMappings(f, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, m := range ms {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); e != 0 {
			return s, fmt.Errorf("binpages: madvise %#x-%#x: %w", m.start, m.end, e)
		}
		s.Mappings++
		s.Bytes += uint64(m.end - m.start)
	}
	return s, nil
}

// mapping is one address range of /proc/self/maps.
type mapping struct{ start, end uintptr }

// readOnlyMappings lists the private, non-writable mappings of the file
// dev major:minor, inode ino in a /proc/<pid>/maps text (proc(5): "start-end
// perms offset major:minor inode path").
func readOnlyMappings(r io.Reader, major, minor uint32, ino uint64) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		perms := f[1]
		if len(perms) != 4 || perms[1] == 'w' || perms[3] != 'p' {
			continue
		}
		maj, min, ok := strings.Cut(f[3], ":")
		if !ok {
			return nil, fmt.Errorf("binpages: maps: bad device %q", f[3])
		}
		if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino {
			continue
		}
		if n, err := strconv.ParseUint(maj, 16, 32); err != nil || uint32(n) != major {
			continue
		}
		if n, err := strconv.ParseUint(min, 16, 32); err != nil || uint32(n) != minor {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("binpages: maps: bad range %q", f[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("binpages: maps: bad range %q", f[0])
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}
