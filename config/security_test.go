package config

import (
	"strings"
	"testing"
)

// A node reachable from other machines refuses to start without TLS
// material and a gossip key, naming the missing keys, unless insecure.
func TestSecureByDefault(t *testing.T) {
	full := []string{"--tls-cert", "n.crt", "--tls-key", "n.key", "--tls-ca", "ca.crt", "--gossip-key-file", "g.key"}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" = valid
	}{
		{"loopback plain", nil, ""},
		{"localhost plain", []string{"--api-addr", "localhost:7070"}, ""},
		{"exposed api", []string{"--api-addr", "0.0.0.0:7070"}, "tls-cert, tls-key, tls-ca, gossip-key-file: required, since not loopback: api-addr 0.0.0.0:7070"},
		{"exposed peer and gossip", []string{"--peer-addr", "10.0.0.1:7071", "--gossip-addr", "10.0.0.1:7946"}, "peer-addr 10.0.0.1:7071, gossip-addr 10.0.0.1:7946"},
		{"exposed, TLS but no gossip key", []string{"--api-addr", "0.0.0.0:7070", "--tls-cert", "n.crt", "--tls-key", "n.key", "--tls-ca", "ca.crt"}, "gossip-key-file: required"},
		{"exposed, gossip key but no TLS", []string{"--api-addr", "0.0.0.0:7070", "--gossip-key-file", "g.key"}, "tls-cert, tls-key, tls-ca: required"},
		{"exposed, everything", append([]string{"--api-addr", "0.0.0.0:7070"}, full...), ""},
		{"exposed, insecure", []string{"--api-addr", "0.0.0.0:7070", "--insecure"}, ""},
		{"http only exposed", []string{"--http-addr", "0.0.0.0:4040"}, ""},
		{"half the TLS keys", []string{"--tls-cert", "n.crt"}, "tls-key: must be set with the other TLS keys"},
		{"http-tls without TLS", []string{"--http-tls"}, "http-tls: needs tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, append([]string{"--id", "1"}, tc.args...), nil, "")
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
			if tc.want != "" && strings.Contains(tc.want, "required") && !strings.Contains(err.Error(), "--insecure") {
				t.Fatalf("the error does not name --insecure: %v", err)
			}
		})
	}
}
