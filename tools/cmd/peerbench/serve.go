//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"google.golang.org/grpc"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/tools/peerservers/kinds"
	"github.com/electord/electord/transport"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// selfID is the node id of the benchmark server's Peer service; the
// heartbeat peers are 2..peers+1.
const selfID election.NodeID = 1

// echoMethod is the Echo call the client makes (BytesValue → BytesValue).
const echoMethod = echo.MethodEcho

// hbReceiver answers every Heartbeat at once, as a healthy leader would:
// HeartbeatResp from the server to the sender, same term and leader. Other
// messages are accepted and dropped.
type hbReceiver struct{}

func (hbReceiver) Receive(in transport.Inbound) error {
	if in.Reply != nil && in.Msg.Type == election.MsgHeartbeat {
		in.Reply <- election.Message{
			Type:   election.MsgHeartbeatResp,
			From:   selfID,
			To:     in.Msg.From,
			Term:   in.Msg.Term,
			Leader: in.Msg.Leader,
		}
	}
	return nil
}

func (hbReceiver) Failed(election.Message, error) {}

// memStats is the serve subcommand's answer to "stats" on stdin.
type memStats struct {
	RSS        uint64 `json:"rss"`
	HeapAlloc  uint64 `json:"heap_alloc"`
	HeapInuse  uint64 `json:"heap_inuse"`
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
	Goroutines int    `json:"goroutines"`
}

// serve is the server process: `peerbench serve --kind K --cpu 0`. It
// builds the server with kinds.Start (which listens on 127.0.0.1:0, so
// every kind is constructed the same way the conformance suite builds it),
// registers the lftest Echo service and the Peer service on it, prints
// "listening <addr>" on stdout, then reads commands on stdin, one
// per line: "stats" answers one JSON memStats line (after a full GC).
// End of stdin (the parent closed it or died) stops the server and exits.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	kind := fs.String("kind", "grpc", "server kind")
	cpu := fs.Int("cpu", 0, "CPU to pin every thread to (-1: no pinning)")
	procs := fs.Int("procs", 1, "GOMAXPROCS")
	workers := fs.Int("workers", 0, "kinds.Options.Workers: pool size of grpc-workers, lf, hsha (0: each kind's default)")
	tlsDir := fs.String("tls-dir", "", "serve mutual TLS with the certificates in this directory (written by --tls)")
	fs.Parse(args)
	// PEERBENCH_CPUPROFILE=dir writes a CPU profile of each server process
	// to dir/<kind>-<pid>.pprof (for looking into a kind's cost per call).
	if dir := os.Getenv("PEERBENCH_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", *kind, os.Getpid())))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	runtime.GOMAXPROCS(*procs) // explicit: also stops the runtime re-deriving it
	if *cpu >= 0 {
		if err := pinProcess(*cpu); err != nil {
			return err
		}
	}
	if _, err := raiseNoFile(); err != nil {
		return err
	}
	register := func(r grpc.ServiceRegistrar) {
		echo.Register(r)
		pb.RegisterPeerServer(r, transport.NewPeerService(selfID, hbReceiver{}))
	}
	serveErr := make(chan error, 1)
	opts := kinds.Options{
		Workers:   *workers,
		ServeDone: func(err error) { serveErr <- err },
	}
	if *tlsDir != "" {
		var err error
		if opts.TLS, err = serverTLS(*tlsDir); err != nil {
			return err
		}
	}
	addr, srv, err := kinds.Start(*kind, register, opts)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", addr)

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	enc := json.NewEncoder(os.Stdout)
	for {
		select {
		case err := <-serveErr:
			if err == nil || errors.Is(err, grpc.ErrServerStopped) {
				err = errors.New("returned")
			}
			return fmt.Errorf("Serve: %w", err)
		case line, ok := <-lines:
			if !ok {
				stopped := make(chan struct{})
				go func() { srv.Stop(); close(stopped) }()
				select {
				case <-stopped:
					return nil
				case <-time.After(5 * time.Second):
					return errors.New("Stop did not return within 5s")
				}
			}
			switch line {
			case "stats":
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				rss, _ := vmRSS("self")
				enc.Encode(memStats{
					RSS: rss, HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse,
					StackInuse: ms.StackInuse, Sys: ms.Sys, Goroutines: runtime.NumGoroutine(),
				})
			default:
				fmt.Fprintf(os.Stderr, "peerbench serve: unknown command %q\n", line)
			}
		}
	}
}
