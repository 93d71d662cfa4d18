package daemon

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// Both peer servers take max-message-bytes and max-header-list-bytes from
// the config (issue 11 item 5; before, 1 MiB and 16 KiB were constants):
// with 4 KiB of each, the server says 4096 in its SETTINGS, refuses a 6 KiB
// header list, serves a small message, and refuses a message that claims
// more than 4 KiB with ResourceExhausted before reading it. The grpc server
// also takes peer-stream-timeout: a stream that sends HEADERS only ends
// with DeadlineExceeded once it has passed (300 ms here, below what
// config.Validate allows, to keep the test short; before, 15 s).
func TestPeerServerTakesConfiguredLimits(t *testing.T) {
	for _, kind := range []string{"grpc", "lf"} {
		t.Run(kind, func(t *testing.T) {
			srvIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
			cfg := nodeConfig(func(c *config.Config) {
				c.PeerServer, c.MaxMessageBytes, c.MaxHeaderListBytes, c.PeerStreamTimeout = kind, 4096, 4096, 300*time.Millisecond
			})
			addr := servePeerServer(t, cfg, transport.NewPeerService(2, srvIn))
			p := dialRawPeer(t, addr)
			if v, ok := p.settings[http2.SettingMaxHeaderListSize]; !ok || v != 4096 {
				t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE: %d (sent: %v), want 4096 (max-header-list-bytes)", v, ok)
			}
			m := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 5}
			p.send(1, m, "x-pad", strings.Repeat("a", 3<<10), "x-pad-2", strings.Repeat("b", 3<<10))
			if got := p.answer(1); got == "status 0 " {
				t.Errorf("a 6 KiB header list was served with max-header-list-bytes 4096")
			} else {
				t.Logf("a 6 KiB header list: %s", got)
			}
			p = dialRawPeer(t, addr) // a header list over the limit may end the connection
			p.send(1, m)
			if got := p.answer(1); got != "status 0 " {
				t.Errorf("a small message: %q, want OK", got)
			}
			p.claim(3) // claims 1 MiB
			if got := p.answer(3); !strings.HasPrefix(got, "status 8 ") {
				t.Errorf("a message claiming 1 MiB with max-message-bytes 4096: %q, want ResourceExhausted (8)", got)
			} else {
				t.Logf("a message claiming 1 MiB: %s", got)
			}
			if kind != "grpc" {
				return
			}
			start := time.Now()
			p.open(5)
			if got := p.answer(5); !strings.HasPrefix(got, "status 4 ") {
				t.Errorf("a HEADERS-only stream with peer-stream-timeout 300ms: %q, want DeadlineExceeded (4)", got)
			}
			t.Logf("the HEADERS-only stream ended after %v", time.Since(start).Round(time.Millisecond))
		})
	}
}
