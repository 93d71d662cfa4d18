//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of utime/stime in /proc/<pid>/stat. Linux fixes
// USER_HZ at 100 on every architecture Go supports (sysconf(_SC_CLK_TCK)
// needs cgo to ask, and always answers 100 there).
const userHZ = 100

// pinProcess binds every thread of this process to cpu. sched_setaffinity
// acts on one thread, so it walks /proc/self/task until a pass finds every
// thread already bound (a thread created meanwhile inherits the mask of
// the thread that created it, so the walk converges). Threads created later
// inherit the mask too.
func pinProcess(cpu int) error {
	var want unix.CPUSet
	want.Set(cpu)
	for pass := 0; pass < 20; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		changed := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err != nil {
				continue // the thread exited
			}
			if cur == want {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &want); err != nil {
				return fmt.Errorf("pin thread %d to cpu %d: %w", tid, cpu, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("pin to cpu %d: threads kept appearing", cpu)
}

// raiseNoFile lifts the soft RLIMIT_NOFILE to the hard limit.
func raiseNoFile() (uint64, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	r.Cur = r.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return r.Cur, nil
}

// cpuTicks returns utime+stime of process pid ("self" for this one), in
// USER_HZ ticks, summed over all its threads, dead ones included.
func cpuTicks(pid string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// comm (field 2) may hold spaces and parentheses: fields after it are
	// counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return ut + st, nil
}

// vmRSS returns VmRSS of process pid in bytes, from /proc/<pid>/status.
func vmRSS(pid string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseUint(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%s/status: no VmRSS", pid)
}

// runDelay returns the time the threads of process pid spent runnable but
// waiting for a CPU (second field of /proc/<pid>/task/*/schedstat), summed
// over the live threads. On a shared machine it shows how much of a window
// the process lost to other load.
func runDelay(pid string) time.Duration {
	ents, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return 0
	}
	var sum uint64
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			sum += v
		}
	}
	return time.Duration(sum)
}

// loadAvg1 is the 1-minute load average.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
