// Package binpages lets a long-running process give back the pages of its
// own executable that only its start needed.
//
// A Go binary's code and read-only data are mapped from its file. Every page
// a process touches stays in its resident set until the process exits, and
// the kernel maps the cached pages around each one touched (fault-around),
// so package initialisation, flag and config parsing and client set-up leave
// most of the binary resident for the life of the process: about two thirds
// of an idle node's RSS. Release drops the process's mappings of those
// pages. They are clean copies of the file, so nothing is lost: the page
// cache keeps them (shared by every process of the binary), and a page used
// again is mapped again by a minor fault, without I/O. What stays resident
// afterwards is what the process keeps using.
package binpages

// Stats is what Release did.
type Stats struct {
	// Mappings is how many read-only mappings of the executable were
	// released; Bytes is their size (resident or not).
	Mappings int
	Bytes    uint64
}
