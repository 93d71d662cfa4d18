package kinds

import (
	"runtime"
	"testing"

	"github.com/electord/electord/config"
)

// TestPoolConfigIsANodes: the benchmark's pool runs with a node's settings
// (but for the connection limit), though its server does not link config.
func TestPoolConfigIsANodes(t *testing.T) {
	d := config.Default()
	got := poolConfig(Options{})
	if got.HandshakeTimeout != d.HandshakeTimeout || got.IdleTimeout != d.IdleTimeout || got.MaxBufferedBytes != d.PeerMaxBufferedBytes {
		t.Errorf("poolConfig: handshake %v, idle %v, buffered %d; a node's: %v, %v, %d",
			got.HandshakeTimeout, got.IdleTimeout, got.MaxBufferedBytes, d.HandshakeTimeout, d.IdleTimeout, d.PeerMaxBufferedBytes)
	}
	if got.Workers != d.PeerWorkerCount() {
		t.Errorf("poolConfig: %d workers at GOMAXPROCS %d; a node's: %d", got.Workers, runtime.GOMAXPROCS(0), d.PeerWorkerCount())
	}
}
