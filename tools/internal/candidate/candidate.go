// Package candidate is a candidate application as a process of its own:
// Main campaigns through one node (the Go client's Campaign, or
// CampaignMany on one stream) in the elections named, and Start runs it and
// waits until it stands. Killing the process is what killing a real app
// does to its streams: the kernel closes them, and the node withdraws the
// candidacies. electbench's `app` subcommand and the chaos schedule's apps
// (package chaos) both run it.
package candidate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/electord/electord/client"
)

// Ready is the line an app prints once every one of its candidacies is
// registered with its node.
const Ready = "ready"

// Main is the app's main, given its flags: it campaigns through one node in
// every election named, prints Ready once its node has registered them
// all, and returns when any candidacy ends (its node died or dropped the
// stream): a candidacy is never stood again by the same process, as a real
// app's restart is a new process.
func Main(args []string) error {
	fs := flag.NewFlagSet("app", flag.ExitOnError)
	api := fs.String("api", "", "the node's gRPC API address")
	names := fs.String("elections", "jobs", "elections to campaign in, comma-separated")
	value := fs.String("value", "", "the candidacy's value")
	prio := fs.Int64("priority", 0, "the candidacy's priority")
	oneStream := fs.Bool("one-stream", false, "hold every candidacy on one stream (the Go client's CampaignMany) instead of a stream each")
	placement := fs.String("placement", "", "the placement every candidacy asks for (sticky, spread; empty: the node's default)")
	fs.Parse(args)
	c, err := client.New(*api)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []client.CampaignOption{client.WithPriority(*prio)}
	if *placement != "" {
		opts = append(opts, client.WithPlacement(*placement))
	}
	if *oneStream {
		cs, err := c.CampaignMany(ctx, strings.Split(*names, ","), *value, opts...)
		if err != nil {
			return fmt.Errorf("campaign many: %w", err)
		}
		go func() {
			for range cs.Events() { // the node's word; the harness observes elsewhere
			}
		}()
		fmt.Println(Ready)
		<-cs.Done()
		return fmt.Errorf("the candidacies' stream ended: %v", cs.Err())
	}
	var cps []*client.Campaign
	for _, name := range strings.Split(*names, ",") {
		cp, err := c.Campaign(ctx, name, *value, opts...)
		if err != nil {
			return fmt.Errorf("campaign %s: %w", name, err)
		}
		cps = append(cps, cp)
		go func() {
			for range cp.Events() { // the node's word; the harness observes elsewhere
			}
		}()
	}
	fmt.Println(Ready)
	ended := make(chan string, len(cps))
	for i, cp := range cps {
		go func() { <-cp.Done(); ended <- fmt.Sprintf("candidacy %d ended: %v", i, cp.Err()) }()
	}
	return fmt.Errorf("%s", <-ended)
}

// Spec is what one app stands for.
type Spec struct {
	// Command runs Main with the flags that follow it (for example
	// electbench's path and "app"); it may start with a wrapper that execs
	// in place (ip netns exec NS, env VAR=1), so that the process signalled
	// is the app.
	Command   []string
	API       string   // the node's gRPC address, as the app dials it
	Elections []string // campaigned in, each by one stream unless OneStream
	Value     string
	Priority  int64
	Log       string // the app's stderr is appended here
	// OneStream holds every candidacy on one stream (CampaignMany).
	OneStream bool
	Placement string // asked for by every candidacy; "" = the node's default
}

// Proc is a running app.
type Proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs the app of s and returns once it printed Ready. It fails if
// the app exits first, or does not stand within 30 s or before ctx ends
// (the app is then killed).
func Start(ctx context.Context, s Spec) (*Proc, error) {
	if len(s.Command) == 0 {
		return nil, errors.New("candidate: no command")
	}
	args := append(s.Command[1:len(s.Command):len(s.Command)], "--api", s.API, "--elections", strings.Join(s.Elections, ","),
		"--value", s.Value, "--priority", fmt.Sprint(s.Priority), "--one-stream="+fmt.Sprint(s.OneStream), "--placement", s.Placement)
	cmd := exec.Command(s.Command[0], args...)
	// The app dies with its harness, whatever ends the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logFile, err := os.OpenFile(s.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
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
	a := &Proc{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		var line []byte
		signalled := false
		for {
			n, err := out.Read(buf)
			line = append(line, buf[:n]...)
			if !signalled && strings.Contains(string(line), Ready+"\n") {
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
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case <-ready:
		return a, nil
	case <-a.exited:
		return nil, fmt.Errorf("app on %s exited before it stood (log %s)", s.API, s.Log)
	case <-ctx.Done():
		a.Kill()
		return nil, ctx.Err()
	case <-timeout.C:
		a.Kill()
		return nil, fmt.Errorf("app on %s did not stand within 30 s (log %s)", s.API, s.Log)
	}
}

// Kill SIGKILLs the app and reaps it.
func (a *Proc) Kill() {
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
}

// Signal sends sig to the app (SIGSTOP and SIGCONT pause and resume it).
func (a *Proc) Signal(sig syscall.Signal) error { return a.cmd.Process.Signal(sig) }

// Exited is closed once the app has exited and been reaped.
func (a *Proc) Exited() <-chan struct{} { return a.exited }
