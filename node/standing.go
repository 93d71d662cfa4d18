package node

import (
	"context"
	"time"
)

// CandidateProbeInfo is the candidate probe's verdict, as the status shows it.
type CandidateProbeInfo struct {
	URL string `json:"url"`
	// OK: the probe passes (its success threshold was met, and no failure
	// threshold since), so the node stands.
	OK bool `json:"ok"`
	// LastError is the last failed probe's error ("" if none failed since
	// it last passed).
	LastError string `json:"last_error,omitempty"`
	// Since is when OK last changed (the node's start, before the first
	// verdict).
	Since time.Time `json:"since"`
}

// candidateProbeStart is the verdict a node with a candidate probe starts with: it
// does not stand until a probe passes, so an app that is not up yet never
// has its node elected (a Kubernetes readiness probe starts failing too).
func candidateProbeStart(url string) *CandidateProbeInfo {
	return &CandidateProbeInfo{URL: url, LastError: "no probe has passed yet", Since: time.Now()}
}

// standing reports whether this node stands in the default election: it
// does unless its candidate probe fails.
func (n *Node) standing() bool { return n.candidateProbe == nil || n.candidateProbe.OK }

// CandidateProbed records the candidate probe's verdict: the node stands in the
// default election while p.OK, and withdraws otherwise: if it leads it
// hands over as a resign does, and it neither campaigns nor takes a
// leadership handed to it until a verdict says OK again. Standing again
// is sticky: it follows the sitting leader.
func (n *Node) CandidateProbed(ctx context.Context, p CandidateProbeInfo) error {
	return n.do(ctx, func() error {
		was := n.standing()
		n.candidateProbe, n.dirty = &p, true
		if now := n.standing(); now != was {
			if now {
				n.log.Info("candidate probe passes: standing in the election", "probe", p.URL)
			} else {
				n.log.Warn("candidate probe fails: not standing in the election (handing over if leading)", "probe", p.URL, "err", p.LastError)
			}
		}
		if !n.halted() {
			n.sm.Stand(n.standing())
		}
		return nil
	})
}

// NotStanding says why this node is no candidate in the default election,
// "" while it is one: the status page, the API's Status and electctl show
// it.
// A node without a candidate probe always stands.
func (s StatusInfo) NotStanding() string {
	if p := s.CandidateProbe; p != nil && !p.OK {
		return "the candidate probe " + p.URL + " fails (" + p.LastError + ")"
	}
	return ""
}
