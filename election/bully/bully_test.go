package bully_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/bully"
	"github.com/electord/electord/election/electiontest"
)

// TestTranscripts replays testdata/*.txt; -rewrite regenerates them.
func TestTranscripts(t *testing.T) {
	electiontest.Run(t, "testdata", func(cfg election.Config) (election.StateMachine, error) { return bully.New(cfg) })
}
