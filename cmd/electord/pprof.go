//go:build electord_pprof

package main

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/metrics"
	"strings"
)

// A profiling build (go build -tags electord_pprof ./cmd/electord) serves
// net/http/pprof on the address in ELECTORD_PPROF_DEBUG_ADDR
// (docs/OPERATIONS.md, "Profiling a node"). The release binary never links
// this file: a debug port is not something a node should open by default,
// and net/http/pprof's init would cost every node memory.
func init() {
	addr := os.Getenv("ELECTORD_PPROF_DEBUG_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/memory-classes", memoryClasses)
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			fmt.Fprintln(os.Stderr, "electord: ELECTORD_PPROF_DEBUG_ADDR:", err)
		}
	}()
}

// memoryClasses writes runtime/metrics' /memory/classes/ (how the runtime's
// mapped memory splits into heap, stacks and its own structures) and the
// GC's settings, one "name value" a line.
func memoryClasses(w http.ResponseWriter, _ *http.Request) {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/gomemlimit") ||
			strings.HasPrefix(d.Name, "/gc/gogc") || strings.HasPrefix(d.Name, "/sched/goroutines") || d.Name == "/gc/cycles/total:gc-cycles" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
}
