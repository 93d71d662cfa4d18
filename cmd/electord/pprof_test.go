package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The release binary links no profiler: pprof.go is built only with the
// electord_pprof tag (a debug port, and net/http/pprof's init, are nothing
// a node should carry by default). The profiling build does link it.
func TestOnlyTheProfilingBuildLinksPprof(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	deps := func(tags ...string) []string {
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.Command(gobin, append(args, "github.com/electord/electord/cmd/electord")...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	if slices.Contains(deps(), "net/http/pprof") {
		t.Fatal("cmd/electord links net/http/pprof without the electord_pprof tag")
	}
	if !slices.Contains(deps("-tags", "electord_pprof"), "net/http/pprof") {
		t.Fatal("the electord_pprof build does not link net/http/pprof: the profiling hook is gone")
	}
}
