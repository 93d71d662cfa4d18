// Package named holds what a node keeps about named elections besides their
// state machines: the rule for names, the queue of local candidacies per
// election, and the table of which nodes stand in which election. It is pure
// like the rest of election/: no goroutines, clocks, sockets or locks; the
// node's loop owns every value of it.
package named

import (
	"errors"
	"fmt"
)

// MaxNameLen is the longest election name, in bytes.
const MaxNameLen = 128

// MaxValueLen is the longest value a candidacy may carry (an address, a
// URL), in bytes.
const MaxValueLen = 1024

// ErrInvalidName is wrapped by every name error.
var ErrInvalidName = errors.New("invalid election name")

// ErrValueTooLong refuses a candidacy value over MaxValueLen.
var ErrValueTooLong = fmt.Errorf("election value longer than %d bytes", MaxValueLen)

// CheckName reports whether name may name an election: 1 to MaxNameLen
// bytes of A-Z a-z 0-9 . _ -, so that it sits in a URL path segment, a log
// line and a file as it is. The empty name is the default election
// wherever a name is optional; CheckName refuses it, since nobody campaigns
// for the default election by name. The error wraps ErrInvalidName and
// says which byte at which offset is wrong.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty (1 to %d bytes of A-Z a-z 0-9 . _ -)", ErrInvalidName, MaxNameLen)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidName, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w: byte %q at offset %d (only A-Z a-z 0-9 . _ - are allowed)", ErrInvalidName, name[i], i)
		}
	}
	if name == "." || name == ".." {
		// A path segment of dots is rewritten by every URL cleaner.
		return fmt.Errorf("%w: %q is a path segment of its own", ErrInvalidName, name)
	}
	return nil
}

func nameByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-'
}

// CheckValue reports whether v may be a candidacy's value.
func CheckValue(v string) error {
	if len(v) > MaxValueLen {
		return fmt.Errorf("%w (got %d)", ErrValueTooLong, len(v))
	}
	return nil
}
