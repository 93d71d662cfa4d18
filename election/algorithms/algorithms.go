// Package algorithms is the one list of election algorithms electord knows:
// their names and constructors. Configuration, the instance loop, the
// simulator and the dev cluster read it; adding an algorithm is a new
// package and one line here.
package algorithms

import (
	"fmt"
	"strings"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/bully"
	"github.com/electord/electord/election/ring"
)

// Factory builds one node's state machine.
type Factory func(election.Config) (election.StateMachine, error)

// registered is in the order users see the names (the default, config.DefaultAlgorithm, first).
var registered = []struct {
	name string
	new  Factory
}{
	{bully.Name, bully.New},
	{ring.Name, ring.New},
}

// Names lists the registered algorithms in the order users see them.
func Names() []string {
	out := make([]string, len(registered))
	for i, r := range registered {
		out[i] = r.name
	}
	return out
}

// Check returns an error naming the known algorithms unless name is one.
func Check(name string) error {
	if _, ok := lookup(name); !ok {
		return fmt.Errorf("must be one of %s, got %q", strings.Join(Names(), ", "), name)
	}
	return nil
}

// New builds a state machine that elects with the named algorithm.
func New(name string, cfg election.Config) (election.StateMachine, error) {
	f, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("algorithm: %w", Check(name))
	}
	return f(cfg)
}

func lookup(name string) (Factory, bool) {
	for _, r := range registered {
		if r.name == name {
			return r.new, true
		}
	}
	return nil, false
}

// VotersForward reports whether, in a named election in quorum mode, a
// member that does not stand (a voter) takes the algorithm's Elections
// rather than refusing them at its inbox. The ring's voter forwards the
// round and is counted in it as reachable (Message.Support), since the
// round's initiator elects only when a majority is reachable; refused, it
// would be skipped, and a round over fewer candidates than a majority
// could never elect. The bully's voter refuses: a campaign skips it as it
// skips a dead node (an Answer from it would stop a candidate that it
// never replaces).
func VotersForward(name string) bool { return name == ring.Name }
