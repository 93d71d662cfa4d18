package daemon

import (
	"context"

	"github.com/electord/electord/node"
)

// startCandidateProbe runs the candidate probe, when candidate-probe is
// set, on a goroutine of its own until ctx ends: its verdicts make the
// node stand or withdraw in the default election (node.CandidateProbed).
// probeDone is closed when it has ended (at once without a probe).
func (d *Daemon) startCandidateProbe(ctx context.Context) {
	d.probeDone = make(chan struct{})
	cfg := d.Config
	if cfg.CandidateProbe == "" {
		close(d.probeDone)
		return
	}
	p, err := node.NewCandidateProber(node.CandidateProberConfig{URL: cfg.CandidateProbe, Period: cfg.CandidateProbePeriod,
		Timeout: cfg.CandidateProbeTimeout, Failures: cfg.CandidateProbeFailures, Successes: cfg.CandidateProbeSuccesses, Logger: d.log})
	if err != nil {
		// Validate checked every key: this is a field forgotten here. The
		// node does not stand (it started so), which the status says.
		d.log.Error("candidate probe not started: the node will not stand", "err", err)
		close(d.probeDone)
		return
	}
	go func() {
		defer close(d.probeDone)
		p.Run(ctx, func(v node.CandidateProbeInfo) {
			if err := d.Node.CandidateProbed(ctx, v); err != nil && ctx.Err() == nil {
				d.log.Warn("candidate probe: the node did not take the verdict", "err", err)
			}
		})
	}()
}
