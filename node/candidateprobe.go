package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"time"
)

// CandidateProberConfig configures a CandidateProber: the candidate-probe
// keys (config.Default has every default; this package takes none).
type CandidateProberConfig struct {
	URL       string
	Period    time.Duration
	Timeout   time.Duration
	Failures  int // failed probes in a row before the verdict fails
	Successes int // passed probes in a row before it passes again
	Logger    *slog.Logger
}

// CandidateProber asks an app's health endpoint, every period, whether the
// app is fit to lead, the way a Kubernetes HTTP probe does: a probe passes
// on a 2xx or 3xx status within the timeout (a redirect is not followed);
// a refused connection, a timeout, any other error or status fails it.
// One goroutine (Run) and one timer; each probe is one request on a kept
// connection.
type CandidateProber struct {
	cfg    CandidateProberConfig
	client *http.Client
}

// NewCandidateProber checks cfg and builds the prober.
func NewCandidateProber(cfg CandidateProberConfig) (*CandidateProber, error) {
	switch {
	case cfg.URL == "":
		return nil, errors.New("node: CandidateProberConfig.URL (candidate-probe) is required")
	case cfg.Period <= 0 || cfg.Timeout <= 0:
		return nil, fmt.Errorf("node: CandidateProberConfig.Period and Timeout (candidate-probe-period, -timeout) must be positive, got %v and %v", cfg.Period, cfg.Timeout)
	case cfg.Failures < 1 || cfg.Successes < 1:
		return nil, fmt.Errorf("node: CandidateProberConfig.Failures and Successes (candidate-probe-failures, -successes) must be at least 1, got %d and %d", cfg.Failures, cfg.Successes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1, 1
	tr.Proxy = nil // a health endpoint is asked directly, never through HTTP_PROXY
	return &CandidateProber{cfg: cfg, client: &http.Client{
		Transport: tr,
		// A redirect is the answer: 3xx passes, as in Kubernetes.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// probeBodyLimit is how much of an answer's body a probe reads (to keep the
// connection) before it closes it.
const probeBodyLimit = 4 << 10

// Check runs one probe. It returns nil when it passes; refused says the
// connection was refused: nothing listens, the app's process is gone.
func (p *CandidateProber) Check(ctx context.Context) (refused bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("User-Agent", "electord-candidate-probe")
	resp, err := p.client.Do(req)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED), err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, probeBodyLimit))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return false, fmt.Errorf("status %d", resp.StatusCode)
	}
	return false, nil
}

// Run probes at once and then every period (from the start of one probe to
// the next) until ctx ends, and calls report with the first verdict and
// each change of it (of OK, or of the last error). It returns when ctx
// ends, after the probe in flight, which ctx cancels.
func (p *CandidateProber) Run(ctx context.Context, report func(CandidateProbeInfo)) {
	defer p.client.CloseIdleConnections()
	v := probeVerdict{failures: p.cfg.Failures, successes: p.cfg.Successes,
		info: CandidateProbeInfo{URL: p.cfg.URL, LastError: "no probe has passed yet", Since: time.Now()}}
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		refused, err := p.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.cfg.Logger.Debug("candidate probe failed", "probe", p.cfg.URL, "refused", refused, "err", err)
		}
		if v.observe(err, refused, start) || first {
			first = false
			report(v.info)
		}
		timer.Reset(max(0, p.cfg.Period-time.Since(start)))
	}
}

// probeVerdict turns probe results into a verdict with the thresholds of
// Kubernetes probes: failures failed probes in a row fail it, successes
// passed ones in a row pass it, and a refused connection fails it at once.
type probeVerdict struct {
	failures, successes int
	failed, passed      int // the current run of each
	info                CandidateProbeInfo
}

// observe takes one probe's result (err nil: passed) at time at, and
// reports whether the verdict (OK or the last error) changed.
func (v *probeVerdict) observe(err error, refused bool, at time.Time) bool {
	before := v.info
	if err == nil {
		v.failed, v.passed = 0, v.passed+1
		switch {
		case v.info.OK:
			v.info.LastError = "" // a failure short of the threshold is over
		case v.passed >= v.successes:
			v.info.OK, v.info.Since, v.info.LastError = true, at, ""
		}
		return v.info != before
	}
	v.passed, v.failed = 0, v.failed+1
	v.info.LastError = err.Error()
	if v.info.OK && (refused || v.failed >= v.failures) {
		v.info.OK, v.info.Since = false, at
	}
	return v.info != before
}
