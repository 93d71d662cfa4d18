package config

import (
	"strings"
	"testing"
	"time"
)

// The candidate-probe keys come from flags, the environment and the file,
// and every bad value is refused naming its key.
func TestCandidateProbeKeys(t *testing.T) {
	c, err := load(t, []string{"--id", "1", "--candidate-probe", "http://127.0.0.1:8080/healthz"},
		map[string]string{"ELECTORD_CANDIDATE_PROBE_PERIOD": "100ms"}, "candidate-probe-failures: 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.CandidateProbe != "http://127.0.0.1:8080/healthz" || c.CandidateProbePeriod != 100*time.Millisecond ||
		c.CandidateProbeFailures != 3 || c.CandidateProbeTimeout != DefaultCandidateProbeTimeout ||
		c.CandidateProbeSuccesses != DefaultCandidateProbeSuccesses {
		t.Fatalf("loaded %+v", c)
	}
	// A 100ms period with the 500ms default timeout: the timeout is refused.
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "candidate-probe-timeout: must be positive and at most candidate-probe-period (100ms)") {
		t.Fatalf("want the timeout refused, got %v", err)
	}
	c.CandidateProbeTimeout = 50 * time.Millisecond
	if err := c.Validate(); err != nil {
		t.Fatalf("valid probe config refused: %v", err)
	}

	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.CandidateProbe = "127.0.0.1:8080/healthz" }, "candidate-probe: must be an http:// or https:// URL"},
		{func(c *Config) { c.CandidateProbe = "tcp://127.0.0.1:8080" }, "candidate-probe: must be an http:// or https:// URL"},
		{func(c *Config) { c.CandidateProbe = "http:///healthz" }, "candidate-probe: must name a host"},
		{func(c *Config) { c.CandidateProbe = "http://[::1" }, "candidate-probe: must be an http:// or https:// URL: parse"},
		{func(c *Config) { c.CandidateProbePeriod = time.Millisecond }, "candidate-probe-period: must be at least 10ms, got 1ms"},
		{func(c *Config) { c.CandidateProbeTimeout = 0 }, "candidate-probe-timeout: must be positive"},
		{func(c *Config) { c.CandidateProbeTimeout = 2 * time.Second }, "candidate-probe-timeout: must be positive and at most candidate-probe-period (1s)"},
		{func(c *Config) { c.CandidateProbeFailures = 0 }, "candidate-probe-failures: must be from 1 to 100, got 0"},
		{func(c *Config) { c.CandidateProbeSuccesses = 101 }, "candidate-probe-successes: must be from 1 to 100, got 101"},
	}
	for _, tc := range cases {
		c := Default()
		c.ID = 1
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
	// Off by default, and the defaults validate with it on.
	d := Default()
	d.ID = 1
	if d.CandidateProbe != "" {
		t.Fatalf("candidate-probe is on by default: %q", d.CandidateProbe)
	}
	d.CandidateProbe = "https://localhost:8443/ready"
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults with a probe refused: %v", err)
	}
}
