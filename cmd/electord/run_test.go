package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A running node applies max-procs (default 1) unless GOMAXPROCS is set in
// its environment, and releases the binary's start-up pages once it runs.
// Read from outside: the process's own /metrics and its log.
func TestRunAppliesMaxProcsAndReleasesStartupPages(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "electord")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	// Go's default for a process started without GOMAXPROCS: this test
	// process's own at its start, unless it was started with one.
	goDefault := startProcs
	if os.Getenv("GOMAXPROCS") != "" {
		goDefault = 0
	}
	for _, c := range []struct {
		name string
		args []string
		env  string
		want int
	}{
		{"default", nil, "", 1},
		{"max-procs 2", []string{"--max-procs", "2"}, "", 2},
		{"max-procs 0 is Go's default", []string{"--max-procs", "0"}, "", goDefault},
		{"GOMAXPROCS wins", []string{"--max-procs", "1"}, "GOMAXPROCS=3", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == 0 {
				t.Skip("this test process runs with GOMAXPROCS set, so Go's default is unknown here")
			}
			health := freeAddr(t)
			args := append([]string{"--id", "1", "--data-dir", t.TempDir(), "--api-addr", "127.0.0.1:0",
				"--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
				"--health-addr", health, "--log-level", "debug"}, c.args...)
			cmd := exec.Command(bin, args...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOMAXPROCS=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			released := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "released the binary's start-up pages") {
						released <- sc.Text()
					}
				}
				io.Copy(io.Discard, stderr)
			}()
			select {
			case line := <-released:
				if !strings.Contains(line, "mappings=") || strings.Contains(line, "mappings=0 ") {
					t.Errorf("release logged %q, want mappings > 0", line)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no log line saying the start-up pages were released within 20s")
			}
			got, err := metricValue(health, "go_sched_gomaxprocs_threads", 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("GOMAXPROCS of the node = %d, want %d", got, c.want)
			}
		})
	}
}

// startProcs is this test process's GOMAXPROCS before any test ran: tests
// that call run in this process apply max-procs to it.
var startProcs = runtime.GOMAXPROCS(0)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metricValue reads one unlabelled gauge from addr's /metrics, retrying until the
// server answers or the deadline passes.
func metricValue(addr, name string, within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, name+" "); ok {
					return strconv.Atoi(v)
				}
			}
			return 0, fmt.Errorf("/metrics has no %s", name)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("/metrics on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
