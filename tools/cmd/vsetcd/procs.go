package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is one process the harness started. Every child runs in a process
// group of its own and gets SIGKILL when the harness dies (Pdeathsig);
// killAll ends whatever is still running when the harness exits normally or
// on SIGINT/SIGTERM.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

var children struct {
	sync.Mutex
	live map[*child]bool
}

// startChild starts bin with args; stdout and stderr go to the writers.
// onExit (if set) runs when the process is gone, before anyone waiting on
// exited learns of it.
func startChild(bin string, args []string, stdout, stderr io.Writer, onExit func(*child)) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	children.Lock()
	defer children.Unlock()
	if children.live == nil {
		children.live = map[*child]bool{}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	children.live[c] = true
	go func() {
		cmd.Wait()
		children.Lock()
		delete(children.live, c)
		children.Unlock()
		if onExit != nil {
			onExit(c)
		}
		close(c.exited)
	}()
	return c, nil
}

func (c *child) signal(s syscall.Signal) { c.cmd.Process.Signal(s) }

// stop sends sig and waits up to grace for the exit, then SIGKILLs the group.
func (c *child) stop(sig syscall.Signal, grace time.Duration) {
	c.signal(sig)
	select {
	case <-c.exited:
	case <-time.After(grace):
		logf("pid %d did not exit within %v of %v: SIGKILL", c.cmd.Process.Pid, grace, sig)
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
}

// killAll SIGKILLs every child's process group and waits (briefly) for them.
func killAll() {
	children.Lock()
	var all []*child
	for c := range children.live {
		all = append(all, c)
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	children.Unlock()
	for _, c := range all {
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// lineWriter calls fn with every complete line written to it.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.fn(line)
	}
}

// Ports come from 20000–29999, below Linux's default ephemeral range, so that
// a survivor's outgoing connection cannot take a killed process's port while
// it is down. A port is handed out once per harness run, and only if it can
// be bound for TCP and UDP now (electord's gossip uses both).
const portLo, portHi = 20000, 30000

var usedPorts struct {
	sync.Mutex
	m map[int]bool
}

func freePort() (int, error) {
	usedPorts.Lock()
	defer usedPorts.Unlock()
	if usedPorts.m == nil {
		usedPorts.m = map[int]bool{}
	}
	for range 1000 {
		p := portLo + rand.IntN(portHi-portLo)
		if !usedPorts.m[p] && bindable(p) {
			usedPorts.m[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d–%d after 1000 tries", portLo, portHi-1)
}

func bindable(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(p))
	t, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer t.Close()
	u, err := net.ListenPacket("udp", addr)
	if err == nil {
		u.Close()
	}
	return err == nil
}

// freePorts returns n ports from freePort.
func freePorts(n int) ([]int, error) {
	ps := make([]int, n)
	for i := range ps {
		var err error
		if ps[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// logFile opens (appending) a log file for a child's output.
func logFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
}
