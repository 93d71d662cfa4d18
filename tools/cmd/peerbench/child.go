//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// child is a running `peerbench serve` process.
type child struct {
	cmd   *exec.Cmd
	pid   string
	addr  string
	stdin io.WriteCloser
	lines chan string // stdout lines after "listening"
	done  chan error  // Wait's result
}

type serveOpts struct {
	kind    string
	cpu     int
	procs   int
	workers int
	tlsDir  string // --tls: the certificates (tls.go); "": plaintext
}

func startChild(o serveOpts) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "--kind", o.kind, "--cpu", strconv.Itoa(o.cpu),
		"--procs", strconv.Itoa(o.procs), "--workers", strconv.Itoa(o.workers), "--tls-dir", o.tlsDir)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(o.procs))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, pid: strconv.Itoa(cmd.Process.Pid), stdin: stdin,
		lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	select {
	case l, ok := <-c.lines:
		if a, found := strings.CutPrefix(l, "listening "); ok && found {
			c.addr = a
			return c, nil
		}
		c.kill()
		if !ok {
			return nil, fmt.Errorf("server %s exited before listening: %v", o.kind, <-c.done)
		}
		return nil, fmt.Errorf("server %s: unexpected first line %q", o.kind, l)
	case <-time.After(10 * time.Second):
		c.kill()
		return nil, fmt.Errorf("server %s did not listen within 10s", o.kind)
	}
}

// stats asks the server for its memory numbers (it runs a GC first).
func (c *child) stats() (memStats, error) {
	var ms memStats
	if _, err := io.WriteString(c.stdin, "stats\n"); err != nil {
		return ms, err
	}
	select {
	case l, ok := <-c.lines:
		if !ok {
			return ms, errors.New("server exited")
		}
		return ms, json.Unmarshal([]byte(l), &ms)
	case <-time.After(10 * time.Second):
		return ms, errors.New("server did not answer stats within 10s")
	}
}

func (c *child) cpuTicks() (uint64, error) { return cpuTicks(c.pid) }

// stop closes the server's stdin (it then calls Stop and exits) and waits
// up to 10s; a server still running then is killed and reported.
func (c *child) stop() error {
	c.stdin.Close()
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("server exit: %v", err)
		}
		return nil
	case <-time.After(10 * time.Second):
		c.kill()
		return errors.New("server did not exit within 10s of stdin EOF (killed)")
	}
}

func (c *child) kill() {
	c.cmd.Process.Kill()
}
