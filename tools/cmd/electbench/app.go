package main

import (
	"context"
	"fmt"
	"os"

	"github.com/electord/electord/tools/internal/candidate"
)

// appMain is `electbench app`: a candidate application (candidate.Main).
func appMain(args []string) error { return candidate.Main(args) }

// startApp runs `electbench app` against api (candidate.Start) and returns
// once it stands.
func startApp(node uint64, api string, names []string, value string, prio int64, logPath string) (*candidate.Proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	a, err := candidate.Start(context.Background(), candidate.Spec{Command: []string{self, "app"}, API: api, Elections: names,
		Value: value, Priority: prio, Log: logPath})
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", node, err)
	}
	return a, nil
}
