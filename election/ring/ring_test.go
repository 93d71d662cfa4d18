package ring_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/electiontest"
	"github.com/electord/electord/election/ring"
)

// TestTranscripts replays testdata/*.txt; -rewrite regenerates them.
func TestTranscripts(t *testing.T) {
	electiontest.Run(t, "testdata", func(cfg election.Config) (election.StateMachine, error) { return ring.New(cfg) })
}
