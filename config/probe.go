package config

import (
	"net/url"
)

// validateCandidateProbe checks the candidate-probe keys; bad records an
// error naming the key.
func (c Config) validateCandidateProbe(bad func(key, format string, a ...any)) {
	if c.CandidateProbe != "" {
		u, err := url.Parse(c.CandidateProbe)
		switch {
		case err != nil:
			bad("candidate-probe", "must be an http:// or https:// URL: %v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("candidate-probe", "must be an http:// or https:// URL, got %q", c.CandidateProbe)
		case u.Host == "":
			bad("candidate-probe", "must name a host (http://127.0.0.1:8080/healthz), got %q", c.CandidateProbe)
		}
	}
	if c.CandidateProbePeriod < MinCandidateProbePeriod {
		bad("candidate-probe-period", "must be at least %v, got %v", MinCandidateProbePeriod, c.CandidateProbePeriod)
	}
	if c.CandidateProbeTimeout <= 0 || c.CandidateProbeTimeout > c.CandidateProbePeriod {
		bad("candidate-probe-timeout", "must be positive and at most candidate-probe-period (%v), so one probe ends before "+
			"the next is due, got %v", c.CandidateProbePeriod, c.CandidateProbeTimeout)
	}
	if c.CandidateProbeFailures < 1 || c.CandidateProbeFailures > 100 {
		bad("candidate-probe-failures", "must be from 1 to 100, got %d", c.CandidateProbeFailures)
	}
	if c.CandidateProbeSuccesses < 1 || c.CandidateProbeSuccesses > 100 {
		bad("candidate-probe-successes", "must be from 1 to 100, got %d", c.CandidateProbeSuccesses)
	}
}
