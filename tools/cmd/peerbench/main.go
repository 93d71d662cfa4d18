//go:build linux

// Command peerbench benchmarks the gRPC server kinds of this module against
// each other with the same handlers and the same proto, on loopback.
//
//	go run ./cmd/peerbench [--runs 5] [--duration 3s] [--kinds grpc,grpc-workers,lf,perconn,hsha]
//	                       [--shapes latency,4x16,64x128,4x16-100KB,heartbeat,idle]
//	                       [--client raw|grpc] [--tls] [--out docs/bench/peerbench/<date>.md] [--quick]
//	peerbench serve --kind K [--cpu 0] [--tls-dir DIR]   (the server process; started by the above)
//
// Kinds (kinds.Kinds): grpc (stock grpc.NewServer), grpc-workers (stock,
// grpc.NumStreamWorkers(GOMAXPROCS)), and the transport/lf/engine drivers
// lf (Leader/Followers epoll pool), perconn (goroutine per connection) and
// hsha (Half-Sync/Half-Async). Every server is built by kinds.Start, the
// constructor the conformance suite uses (the stock kinds get its
// panic-recovery interceptor, as the engine recovers panics itself), with
// --workers as kinds.Options.Workers (0: each kind's default). Each
// registers the same two services: lftest's Echo (BytesValue → the same
// BytesValue) and electord's Peer service (transport.NewPeerService) over a
// receiver that answers every Heartbeat at once with a HeartbeatResp.
//
// Processes and pinning. The command re-executes its own binary as the
// server, `peerbench serve --kind K --cpu 0`, a fresh process for every
// (run, shape, kind), and generates the load from the parent process. The
// server pins every one of its threads to CPU --server-cpu (0) and the
// client to --client-cpu (1), with sched_setaffinity over /proc/self/task
// (later threads inherit the mask). GOMAXPROCS is 1 in both: a process
// bound to one core gains nothing from more Ps, only scheduler churn, and
// GOMAXPROCS=1 makes the server kinds compare as they would on a one-core
// budget. Note the client is one core too: in the closed-loop shapes it can
// saturate before the server does; the "srv core" and "cli core" columns
// show which side ran out (1.00 = a full core). Both raise RLIMIT_NOFILE to
// the hard limit.
//
// Clients. The closed-loop Echo shapes (latency, 4x16, 64x128, 4x16-100KB)
// use by default the raw client of rawclient.go (--client raw): a minimal
// HTTP/2 gRPC client, one goroutine per connection, a precomputed stateless
// request, a few µs of CPU per call where grpc-go's client takes ~18 µs, so
// that on its one core the server, not the client, is what saturates.
// --client grpc runs them with grpc-go ClientConns instead, one goroutine
// per caller. heartbeat and idle always use grpc-go ClientConns.
//
// What is measured, per (kind, shape, run):
//   - QPS: calls that completed without error inside the measured window
//     (after --warmup), divided by the window.
//   - p50/p99/p99.9 latency: client-side, per call, into a log-linear
//     histogram of fixed size (0.8% resolution), so memory does not grow
//     with the number of calls. Heartbeat latency runs from the call's
//     scheduled send time (open loop, no coordinated omission).
//   - server CPU µs/call: utime+stime of the server process from
//     /proc/<pid>/stat (USER_HZ = 100 ticks/s) read just before and just
//     after the window, divided by the calls in the window.
//   - errors: failed calls inside the window (the first message is kept).
//
// Shapes: latency (1 conn × 1 caller, Echo 64 B), 4x16 (4 conns × 16
// closed-loop callers, Echo 64 B), 64x128 (64 × 128, 64 B), 4x16-100KB
// (4 × 16, Echo 100 KiB), heartbeat (--hb-peers 1000 ClientConns, each
// sending Peer.Heartbeat every --hb-period 50ms, open loop: 20,000 calls/s
// offered; achieved rate, latency and CPU/call are reported), idle
// (--idle-conns 1000 grpc-go ClientConns, each connected by one tiny Echo
// call, then idle for 1s). For idle the server answers a "stats" line on
// its stdin by running a GC and printing its VmRSS (/proc/self/status) and
// runtime.MemStats; bytes per idle conn = (after − before) / conns, for
// RSS, HeapInuse and StackInuse. RSS counts user-space memory only, not
// the kernel's socket buffers.
//
// TLS. --tls runs every shape over the peer port's mutual TLS (TLS 1.3,
// transport/peerauth's server and client configs, ECDSA P-256 node
// certificates of a throw-away CA that the parent writes to a temporary
// directory and hands to each server as --tls-dir): grpc and grpc-workers
// with grpc-go's TLS credentials, lf with its own record layer
// (transport/lf/tls_linux.go), both clients (raw and grpc-go) over
// crypto/tls. Each connection's handshake happens before the measured
// window. perconn, hsha and the lf variants have no TLS and fail to start.
//
// Runs interleave kinds: run 1 does every shape for every kind, then run 2,
// and so on, with the kind order rotated each run, so a noisy neighbour
// hits all kinds alike. The report gives per kind and shape the median over
// runs with the min–max spread, the ratio to stock grpc's median (QPS
// ratio, CPU/call ratio), and every raw per-run number. It goes to stdout
// and to --out. A kind that fails to start, errors, or hangs (a shape
// that does not finish in time, a server that does not exit) is reported
// with its failure in the tables instead of aborting the run.
package main

import (
	"flag"
	"fmt"
	"github.com/electord/electord/tools/internal/repo"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/electord/electord/tools/peerservers/kinds"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "peerbench serve:", err)
			os.Exit(1)
		}
		return
	}
	if err := bench(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

type config struct {
	runs       int
	kinds      []string
	shapes     []shape
	load       loadOpts
	serverCPU  int
	clientCPU  int
	procs      int
	workers    int
	out        string
	hbPeers    int
	idleConns  int
	quick      bool
	tls        bool // --tls
	cmdline    string
	commit     string // git HEAD (and dirty server files) when the run started
	startedAt  time.Time
	finishedAt time.Time
}

func bench(args []string) error {
	fs := flag.NewFlagSet("peerbench", flag.ExitOnError)
	runs := fs.Int("runs", 5, "runs (each run does every shape for every kind)")
	duration := fs.Duration("duration", 3*time.Second, "measured window per (kind, shape, run)")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "load before the window opens")
	kindsF := fs.String("kinds", strings.Join(kinds.Kinds, ","), "server kinds, comma-separated")
	shapesF := fs.String("shapes", "latency,4x16,64x128,4x16-100KB,heartbeat,idle", "shapes, comma-separated")
	out := fs.String("out", "", "markdown report file (default docs/bench/peerbench/<date>.md, or <date>-<hhmm>.md if that exists; none with --quick; \"-\" for none)")
	quick := fs.Bool("quick", false, "smoke test: 1 run of 1s, 200ms warmup (explicit --runs/--duration win)")
	hbPeers := fs.Int("hb-peers", 1000, "heartbeat: peers (one ClientConn each)")
	hbPeriod := fs.Duration("hb-period", 50*time.Millisecond, "heartbeat: period per peer")
	idleConns := fs.Int("idle-conns", 1000, "idle: connections")
	timeout := fs.Duration("call-timeout", 5*time.Second, "deadline of each call")
	client := fs.String("client", "raw", "client of the closed-loop Echo shapes: raw (a minimal HTTP/2 client, rawclient.go) or grpc (grpc-go); heartbeat and idle always use grpc-go")
	serverCPU := fs.Int("server-cpu", 0, "CPU for the server process (-1: no pinning)")
	clientCPU := fs.Int("client-cpu", 1, "CPU for the client (-1: no pinning)")
	procs := fs.Int("procs", 1, "GOMAXPROCS of server and client")
	workers := fs.Int("workers", 0, "workers of the pool kinds (0: each kind's default; grpc-workers: GOMAXPROCS)")
	cpuProfile := fs.String("cpuprofile", "", "write the client's CPU profile to this file (debugging)")
	useTLS := fs.Bool("tls", false, "mutual TLS on every connection (grpc, grpc-workers and lf only)")
	fs.Parse(args)
	tlsDir := ""
	if *useTLS {
		dir, err := makeTLSDir()
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		tlsDir = dir
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["runs"] {
			*runs = 1
		}
		if !set["duration"] {
			*duration = time.Second
		}
		if !set["warmup"] {
			*warmup = 200 * time.Millisecond
		}
	}
	cfg := config{
		runs:      *runs,
		load:      loadOpts{duration: *duration, warmup: *warmup, hbPeriod: *hbPeriod, timeout: *timeout, client: *client},
		serverCPU: *serverCPU, clientCPU: *clientCPU, procs: *procs, workers: *workers,
		hbPeers: *hbPeers, idleConns: *idleConns, quick: *quick, tls: *useTLS,
		cmdline:   "peerbench " + strings.Join(args, " "),
		startedAt: time.Now(),
		commit:    gitHead(),
	}
	if *client != "raw" && *client != "grpc" {
		return fmt.Errorf("unknown client %q (raw, grpc)", *client)
	}
	for _, k := range strings.Split(*kindsF, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !slices.Contains(kinds.Kinds, k) && !slices.Contains(kinds.VariantKinds, k) {
			return fmt.Errorf("unknown kind %q (kinds: %s)", k, strings.Join(kinds.Kinds, ","))
		}
		cfg.kinds = append(cfg.kinds, k)
	}
	all := shapeList(*hbPeers, *idleConns)
	for _, s := range strings.Split(*shapesF, ",") {
		i := slices.IndexFunc(all, func(x shape) bool { return x.name == strings.TrimSpace(s) })
		if i < 0 {
			return fmt.Errorf("unknown shape %q", s)
		}
		cfg.shapes = append(cfg.shapes, all[i])
	}
	if len(cfg.kinds) == 0 || len(cfg.shapes) == 0 {
		return fmt.Errorf("nothing to run")
	}
	cfg.out = *out
	switch {
	case cfg.out == "" && cfg.quick:
		cfg.out = "-" // a smoke test writes no report file unless asked
	case cfg.out == "":
		// The default name, in the repository's docs/bench/peerbench, never
		// replaces an earlier report.
		root, err := repo.Root()
		if err != nil {
			return err
		}
		dir := filepath.Join(root, "docs", "bench", "peerbench")
		cfg.out = filepath.Join(dir, cfg.startedAt.Format("2006-01-02")+".md")
		if _, err := os.Stat(cfg.out); err == nil {
			cfg.out = filepath.Join(dir, cfg.startedAt.Format("2006-01-02-1504")+".md")
		}
	}

	runtime.GOMAXPROCS(cfg.procs)
	if cfg.clientCPU >= 0 {
		if err := pinProcess(cfg.clientCPU); err != nil {
			return err
		}
	}
	if _, err := raiseNoFile(); err != nil {
		return err
	}

	var results []result
	for run := 1; run <= cfg.runs; run++ {
		for _, sh := range cfg.shapes {
			for i := range cfg.kinds {
				kind := cfg.kinds[(i+run-1)%len(cfg.kinds)]
				so := serveOpts{kind: kind, cpu: cfg.serverCPU, procs: cfg.procs, workers: cfg.workers, tlsDir: tlsDir}
				r := runOne(so, sh, cfg.load, run)
				logf("run %d/%d %-11s %-13s %s", run, cfg.runs, sh.name, kind, r.brief())
				results = append(results, r)
			}
		}
	}
	cfg.finishedAt = time.Now()
	rep := report(cfg, results)
	fmt.Print(rep)
	if cfg.out != "-" {
		if err := os.WriteFile(cfg.out, []byte(rep), 0o644); err != nil {
			return err
		}
		logf("wrote %s", cfg.out)
	}
	return nil
}
