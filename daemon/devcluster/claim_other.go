//go:build !unix

package devcluster

// claimPort claims nothing where flock is not available: ports are picked
// as free by a bind alone.
func claimPort(int) bool { return true }
