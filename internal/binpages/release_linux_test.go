package binpages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappingsPicksTheExecutablesPrivateReadOnlyRanges(t *testing.T) {
	maps := `00400000-010f4000 r-xp 00000000 fe:01 1234 /usr/bin/electord
010f4000-01f49000 r--p 00cf4000 fe:01 1234 /usr/bin/electord
01f49000-01fe2000 rw-p 01b49000 fe:01 1234 /usr/bin/electord
01fe2000-0202a000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--s 00000000 fe:01 1234 /usr/bin/electord
7f0000001000-7f0000002000 r--p 00000000 fe:01 999 /usr/lib/other.so
7f0000002000-7f0000003000 r--p 00000000 fe:02 1234 /mnt/same-inode-other-device
7f0000003000-7f0000004000 r-xp 00000000 fe:01 1234 /usr/bin/electord (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
`
	got, err := readOnlyMappings(strings.NewReader(maps), 0xfe, 0x01, 1234)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x10f4000}, {0x10f4000, 0x1f49000}, {0x7f0000003000, 0x7f0000004000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("mapping %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

func TestReadOnlyMappingsRefusesABadLine(t *testing.T) {
	for _, line := range []string{
		"zz-01 r--p 0 fe:01 1234 /bin/x",
		"0200-0100 r--p 0 fe:01 1234 /bin/x",
		"0100-0200 r--p 0 fe01 1234 /bin/x",
	} {
		if _, err := readOnlyMappings(strings.NewReader(line), 0xfe, 1, 1234); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}

// Variables in the executable's writable segments: Release must leave
// what the program wrote to them (a private mapping advised DONTNEED
// would read the file's values back).
var (
	dataVar    = []int{1, 2, 3}       // .data (holds a pointer)
	noptrVar   = [4]int64{1, 2, 3, 4} // .noptrdata
	bssCounter int64                  // .bss
)

func TestReleaseDropsTheBinarysPagesAndKeepsItsVariables(t *testing.T) {
	dataVar[0], noptrVar[0], bssCounter = 100, 200, 300
	before := rssFileKiB(t)
	s, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	t.Logf("released %d mappings, %d bytes; RssFile %d kB -> %d kB", s.Mappings, s.Bytes, before, after)
	if s.Mappings < 2 {
		t.Errorf("released %d mappings, want the code and the read-only data at least", s.Mappings)
	}
	if after >= before {
		t.Errorf("RssFile did not fall: %d kB before, %d kB after", before, after)
	}
	if dataVar[0] != 100 || noptrVar[0] != 200 || bssCounter != 300 {
		t.Fatalf("variables lost: %d %d %d", dataVar[0], noptrVar[0], bssCounter)
	}
	// Code released is mapped again on use.
	if got := strconv.Itoa(len(strings.Repeat("x", 12345))); got != "12345" {
		t.Fatal(got)
	}
}

func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
