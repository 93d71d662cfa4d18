package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/electord/electord/client"
)

// appReady is the line a candidate app prints once every one of its
// candidacies is registered with its node.
const appReady = "ready"

// appMain is `electbench app`: a candidate application, a process of its own
// so that killing it is what killing a real app does to its streams. It
// campaigns through one node in every election named, prints appReady once
// its node has registered them all, and exits when any candidacy ends (its
// node died or dropped the stream): a candidacy is never stood again by the
// same process, as a real app's restart is a new process.
func appMain(args []string) error {
	fs := flag.NewFlagSet("app", flag.ExitOnError)
	api := fs.String("api", "", "the node's gRPC API address")
	names := fs.String("elections", "jobs", "elections to campaign in, comma-separated")
	value := fs.String("value", "", "the candidacy's value")
	prio := fs.Int64("priority", 0, "the candidacy's priority")
	fs.Parse(args)
	c, err := client.New(*api)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cps []*client.Campaign
	for _, name := range strings.Split(*names, ",") {
		cp, err := c.Campaign(ctx, name, *value, client.WithPriority(*prio))
		if err != nil {
			return fmt.Errorf("campaign %s: %w", name, err)
		}
		cps = append(cps, cp)
		go func() {
			for range cp.Events() { // the node's word; the benchmark observes elsewhere
			}
		}()
	}
	fmt.Println(appReady)
	ended := make(chan string, len(cps))
	for i, cp := range cps {
		go func() { <-cp.Done(); ended <- fmt.Sprintf("candidacy %d ended: %v", i, cp.Err()) }()
	}
	return fmt.Errorf("%s", <-ended)
}

// appProc is a running candidate app, started by the benchmark.
type appProc struct {
	node   uint64
	cmd    *exec.Cmd
	exited chan struct{}
}

// startApp runs `electbench app` against api and returns once it printed
// appReady (or failed to within 30 s).
func startApp(node uint64, api string, names []string, value string, prio int64, logPath string) (*appProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "app", "--api", api, "--elections", strings.Join(names, ","),
		"--value", value, "--priority", fmt.Sprint(prio))
	// The app dies with the benchmark, whatever ends the benchmark.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	a := &appProc{node: node, cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		var line []byte
		signalled := false
		for {
			n, err := out.Read(buf)
			line = append(line, buf[:n]...)
			if !signalled && strings.Contains(string(line), appReady+"\n") {
				signalled = true
				close(ready)
			}
			if err != nil {
				break
			}
		}
		cmd.Wait()
		logFile.Close()
		close(a.exited)
	}()
	select {
	case <-ready:
		return a, nil
	case <-a.exited:
		return nil, fmt.Errorf("app on node %d exited before it stood (log %s)", node, logPath)
	case <-time.After(30 * time.Second):
		a.kill()
		return nil, fmt.Errorf("app on node %d did not stand within 30 s (log %s)", node, logPath)
	}
}

// kill SIGKILLs the app and reaps it.
func (a *appProc) kill() {
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
}
