//go:build !linux

package binpages

// Release does nothing outside Linux.
func Release() (Stats, error) { return Stats{}, nil }
