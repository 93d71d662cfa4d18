package node

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data (and only the metadata needed to read it back).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
