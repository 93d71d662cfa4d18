package lf

import (
	"strings"
	"testing"

	"github.com/electord/electord/config"
	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/lf/lftest"
)

// nodeConfig fills the configured fields a test leaves zero: the pool's
// from config.Default() (a node's values), the engine's limits with those
// the pool's tests were written for (lftest.Limits).
func nodeConfig(c Config) Config {
	d := config.Default()
	if c.Workers == 0 {
		c.Workers = d.PeerWorkerCount()
	}
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = d.PeerMaxBufferedBytes
	}
	l := lftest.Limits()
	if c.Limits.MaxRecvMsgBytes == 0 {
		c.Limits.MaxRecvMsgBytes = l.MaxRecvMsgBytes
	}
	if c.Limits.MaxConcurrentStreams == 0 {
		c.Limits.MaxConcurrentStreams = l.MaxConcurrentStreams
	}
	if c.Limits.MaxHeaderListBytes == 0 {
		c.Limits.MaxHeaderListBytes = l.MaxHeaderListBytes
	}
	return c
}

// The pool has no defaults for configured values: a zero Config is refused,
// every missing field named with its config key; what is not configured
// (ReadBudget) and the Workers floor are filled in.
func TestConfigChecked(t *testing.T) {
	_, err := Config{}.checked()
	for _, want := range []string{"Workers (peer-workers)", "MaxConns (max-conns)", "HandshakeTimeout (handshake-timeout)",
		"IdleTimeout (idle-timeout)", "MaxBufferedBytes (peer-max-buffered-bytes)", "MaxRecvMsgBytes (max-message-bytes)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Config{}.checked() = %v, want it to name %s", err, want)
		}
	}
	if _, err := New(engine.NewRegistry(), Config{}); err == nil {
		t.Error("New accepted a zero Config")
	}
	c, err := nodeConfig(Config{Workers: 1}).checked()
	if err != nil || c.Workers != MinWorkers || c.ReadBudget != DefaultReadBudget {
		t.Fatalf("%+v %v", c, err)
	}
}
