package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electord/electord/tools/faultnet"
)

// crashNet (electbench crash) measures crash failover on a cluster the fault
// harness builds: each node on its own address, in a network namespace or,
// with --docker, in a container of its own pod (tools/faultnet), so the
// survivors reach the leader over a real network. It SIGKILLs the leader's
// electord process (the pod, or the namespace, keeps its address: the
// kernel refuses connections, as on a live host) and measures until every
// survivor's /leader names the same new leader, then restarts the node and
// waits for agreement again.
func crashNet(args []string) error {
	fs := flag.NewFlagSet("crash", flag.ExitOnError)
	docker := fs.Bool("docker", false, "run the nodes as containers (one pod each) on a Docker network instead of in network namespaces")
	kills := fs.Int("kills", 20, "SIGKILLs of the leader per algorithm")
	nodes := fs.Int("nodes", 5, "electord processes")
	algos := fs.String("algorithms", "bully,ring", "algorithms to measure")
	bin := fs.String("electord", "", "electord binary (default: build cmd/electord; static with --docker)")
	out := fs.String("out", "", "also write the report to this file")
	fs.Parse(args)
	if err := faultnet.Available(); err != nil {
		return err
	}
	path, cleanup, err := harnessElectord(*bin, *docker)
	if err != nil {
		return err
	}
	defer cleanup()
	pr, closeOut, err := reportTo(*out)
	if err != nil {
		return err
	}
	defer closeOut()
	stop := faultnet.CleanupOnSignal()
	defer stop()
	defer faultnet.CloseAll()

	place := "network namespaces (veth pairs on one bridge)"
	if *docker {
		place = "Docker containers, one pod each (electord in the network namespace of a pause container (tools/cmd/pause)), on a user-defined network"
	}
	pr("# electbench crash\n\n`electbench crash %s`\n\n", strings.Join(args, " "))
	pr("- %s, %s/%s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadavg())
	pr("- %d electord processes in %s, default config; `%s` (%s)\n", *nodes, place, path, describe(path))
	pr("- each kill: SIGKILL of the leader's electord process, then until every survivor's /leader names one new leader (polled in rounds of parallel requests; a round takes a few ms)\n\n")
	pr("| algorithm | kills | p50 ms | p99 ms | max ms | failed |\n|---|---:|---:|---:|---:|---:|\n")
	for _, algo := range strings.Split(*algos, ",") {
		s, failed, err := crashRuns(path, algo, *nodes, *kills, *docker)
		if err != nil {
			return fmt.Errorf("%s: %w", algo, err)
		}
		pr("| %s | %d | %s | %s | %s | %d |\n", algo, len(s), ms(s.pct(0.5)), ms(s.pct(0.99)), ms(s.pct(1)), failed)
	}
	return nil
}

func crashRuns(bin, algo string, n, kills int, docker bool) (samples, int, error) {
	dir, err := os.MkdirTemp("", "electbench-crash-")
	if err != nil {
		return nil, 0, err
	}
	if os.Getenv("ELECTBENCH_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		defer fmt.Fprintln(os.Stderr, "kept", dir)
	}
	c, err := faultnet.New(faultnet.Config{Binary: bin, Nodes: n, Algorithm: algo, Docker: docker, Dir: dir})
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	all := make([]int, n)
	for i := range all {
		all[i] = i + 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var s samples
	failed := 0
	leader, err := agreeOn(c, all, 0, 60*time.Second)
	if err != nil {
		return nil, 0, fmt.Errorf("first agreement: %w", err)
	}
	for k := 0; k < kills; k++ {
		select {
		case <-sigs:
			return s, failed, fmt.Errorf("interrupted")
		default:
		}
		var survivors []int
		for _, i := range all {
			if i != leader {
				survivors = append(survivors, i)
			}
		}
		// Poll while the kill is being reaped: with --docker, noticing the
		// container's exit (docker wait) takes longer than the failover.
		killed := make(chan error, 1)
		t0 := time.Now()
		go func() { killed <- c.Kill(leader) }()
		if _, err := agreeOn(c, survivors, leader, 10*time.Second); err != nil {
			failed++
		} else {
			s = append(s, time.Since(t0))
		}
		if err := <-killed; err != nil {
			return s, failed, err
		}
		if err := c.Start(leader); err != nil {
			return s, failed, err
		}
		if leader, err = agreeOn(c, all, 0, 30*time.Second); err != nil {
			return s, failed, fmt.Errorf("after restarting node %d: %w", leader, err)
		}
	}
	return s, failed, nil
}

// agreeOn polls every node of ids, in parallel rounds, until all name one
// leader other than not (0: any) with HTTP 200, and returns it.
func agreeOn(c *faultnet.Cluster, ids []int, not int, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hc := c.HTTPClient()
	var last string
	for ctx.Err() == nil {
		got := make([]int, len(ids))
		var wg sync.WaitGroup
		for k, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[k] = askLeader(ctx, hc, c.Node(id).HTTPURL)
			}()
		}
		wg.Wait()
		agreed := got[0] > 0 && got[0] != not
		for _, g := range got {
			agreed = agreed && g == got[0]
		}
		if agreed {
			return got[0], nil
		}
		last = fmt.Sprint(got)
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("no agreement within %v (nodes %v last answered leaders %s)", timeout, ids, last)
}

// askLeader returns the leader url's node names (GET /leader, 200), or 0.
func askLeader(ctx context.Context, hc *http.Client, url string) int {
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/leader", nil)
	if err != nil {
		return 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var v struct {
		ID int `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil {
		return 0
	}
	return v.ID
}

// harnessElectord is the electord binary for a faultnet cluster: bin if
// given, else one built from cmd/electord, static for Docker's scratch image.
func harnessElectord(bin string, docker bool) (string, func(), error) {
	if docker && bin == "" {
		return staticElectord()
	}
	return electordBinary(bin)
}
