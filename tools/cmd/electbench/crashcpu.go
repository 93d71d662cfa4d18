package main

// What a crash failover costs the host: the CPU time every surviving node
// spends from just before the kill until every node agrees on the new
// leader, with the host's own busy time and electbench's over the same
// span. Divided by the host's cores it is a floor under the failover time
// that no change of timing can lower: only less work per node can.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// schedNanos is the CPU time of every thread of pid, in nanoseconds: the
// sum of the first field of /proc/PID/task/*/schedstat (the scheduler's
// own count, finer than utime+stime's clock ticks).
func schedNanos(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		sum += n
	}
	return sum
}

// hostBusyTicks is the host's busy and total CPU time (the "cpu" line of
// /proc/stat), in clock ticks: busy is everything but idle and iowait.
func hostBusyTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// cpuSnap is the CPU time spent so far by a set of processes, by the host
// and by electbench.
type cpuSnap struct {
	at        time.Time
	pids      []int
	ticks     int64 // the processes' utime+stime
	nanos     int64 // the processes' schedstat
	hostBusy  int64
	selfTicks int64
}

// snapCPU measures the running processes of c other than except (the
// leader about to be killed).
func (c *cluster) snapCPU(except *proc) cpuSnap {
	s := cpuSnap{at: time.Now()}
	for _, p := range c.procs {
		if p == except || !p.isRunning() {
			continue
		}
		s.pids = append(s.pids, p.cmd.Process.Pid)
	}
	s.measure()
	return s
}

func (s *cpuSnap) measure() {
	s.ticks, s.nanos = 0, 0
	for _, pid := range s.pids {
		t, _ := cpuTicks(pid)
		s.ticks += t
		s.nanos += schedNanos(pid)
	}
	s.hostBusy, _ = hostBusyTicks()
	s.selfTicks, _ = cpuTicks(os.Getpid())
}

// crashCPU is the cost of one failover (see the top of this file).
type crashCPU struct {
	survivors int
	wall      time.Duration // from the first sample to the second
	nanos     time.Duration // the survivors' CPU, schedstat
	ticks     time.Duration // the survivors' CPU, utime+stime
	hostBusy  time.Duration
	self      time.Duration
}

// since measures s's processes again and returns what they spent since s.
func (s cpuSnap) since() crashCPU {
	now := s
	now.measure()
	tick := time.Second / clockTicks
	return crashCPU{
		survivors: len(s.pids),
		wall:      time.Since(s.at),
		nanos:     time.Duration(now.nanos - s.nanos),
		ticks:     time.Duration(now.ticks-s.ticks) * tick,
		hostBusy:  time.Duration(now.hostBusy-s.hostBusy) * tick,
		self:      time.Duration(now.selfTicks-s.selfTicks) * tick,
	}
}

func (u crashCPU) String() string {
	cores := runtime.NumCPU()
	return fmt.Sprintf("%d survivors spent %s ms of CPU (utime+stime %s ms; %s ms per core of %d), host busy %s ms of %s ms x %d cores, electbench %s ms",
		u.survivors, ms(u.nanos), ms(u.ticks), ms(u.nanos/time.Duration(cores)), cores, ms(u.hostBusy), ms(u.wall), cores, ms(u.self))
}

// perfDirEnv names a directory: when set, scale records each failover's
// survivors with perf (call graphs, 999 Hz) into DIR/kill-N.data, from
// before the kill until every node agrees, and the idle second before it
// into DIR/idle-N.data. perf's own cost slows the
// failover it records, so a run with it gives where the CPU goes, not
// figures of record.
const perfDirEnv = "ELECTBENCH_PERF_DIR"

// idleBaseline is how long idleCPU measures the survivors before a kill.
const idleBaseline = time.Second

// idleCPU measures what the processes of c other than except spend in
// idleBaseline with no failover (heartbeats, gossip, a node restarted just
// before still starting up): the part of a failover's CPU that is not the
// failover's. With perfDirEnv it records that second too (idle-N.data).
func (c *cluster) idleCPU(except *proc, i int) crashCPU {
	s := c.snapCPU(except)
	stop := perfRecord(s, fmt.Sprintf("idle-%d", i))
	s = c.snapCPU(except)
	time.Sleep(idleBaseline)
	u := s.since()
	if stop != nil {
		stop()
	}
	return u
}

// perfRecord starts perf on the processes of s, recording into
// DIR/name.data, or returns nil when perfDirEnv is not set or perf did not
// start. stop ends it and waits for its file.
func perfRecord(s cpuSnap, name string) (stop func()) {
	dir := os.Getenv(perfDirEnv)
	if dir == "" || len(s.pids) == 0 {
		return nil
	}
	pids := make([]string, len(s.pids))
	for j, pid := range s.pids {
		pids[j] = strconv.Itoa(pid)
	}
	out := filepath.Join(dir, name+".data")
	cmd := exec.Command("perf", "record", "-q", "-F", "999", "-g", "-o", out, "-p", strings.Join(pids, ","))
	if err := cmd.Start(); err != nil {
		logf("perf: %v", err)
		return nil
	}
	time.Sleep(time.Second) // perf attaches to every thread before it samples
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
}
