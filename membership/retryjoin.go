package membership

import (
	"log/slog"
	"time"
)

// The retry-join policy's periods (see RetryJoin).
const (
	// RetryJoinEvery is how often seeds are tried until one answers.
	RetryJoinEvery = 500 * time.Millisecond
	// RejoinEvery is how often a joined node that sees no other live member
	// joins its seeds again.
	RejoinEvery = 15 * time.Second
)

// RetryJoin keeps this node connected to its seeds (Config.Join), like
// Consul's retry_join. It tries them at once, and then in the background
// every RetryJoinEvery until one answers (a seed may start after this node);
// from then on, every RejoinEvery, it joins them again if no other node is a
// live member (a partition healed after gossip gave up on the other side).
// It stops at Shutdown. With no seeds it does nothing. Call it at most once.
func (m *Membership) RetryJoin() {
	retryJoin{m: m, seeds: m.cfg.Join, log: m.log, retry: RetryJoinEvery, rejoin: RejoinEvery}.start(m.stopRetry)
}

// joiner is what the retry-join policy needs of a Membership.
type joiner interface {
	Join(seeds []string) (int, error)
	Members() []Meta
}

// retryJoin is the policy of RetryJoin, with its periods as parameters.
type retryJoin struct {
	m             joiner
	seeds         []string
	log           *slog.Logger
	retry, rejoin time.Duration
}

// start makes the first attempt now, then retries in a goroutine that ends
// when stop is closed.
func (r retryJoin) start(stop <-chan struct{}) {
	if len(r.seeds) == 0 {
		return
	}
	joined := r.try()
	if !joined {
		r.log.Warn("no gossip seed answered yet; retrying every "+r.retry.String(), "join", r.seeds)
	}
	go func() {
		for {
			wait := r.rejoin
			if !joined {
				wait = r.retry
			}
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			if !joined || len(r.m.Members()) <= 1 {
				if joined = r.try(); joined {
					r.log.Info("joined gossip through a seed", "join", r.seeds)
				}
			}
		}
	}()
}

func (r retryJoin) try() bool {
	n, err := r.m.Join(r.seeds)
	if err != nil || n == 0 {
		r.log.Debug("no gossip seed answered yet", "join", r.seeds, "err", err)
		return false
	}
	return true
}
