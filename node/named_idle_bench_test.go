package node

import (
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// BenchmarkNamedIdleCPU: five in-process nodes (memory transport, the
// product's timings), every node's app standing in N elections on one
// stream (ELECTORD_BENCH_ELECTIONS, default 1,000); once every node agrees
// on every election and a settle of 2 s, the process's CPU time over 10 s,
// per node, in % of a core (idle-%core/node), and the time to agree
// (agree-s). The loops' own cost without gRPC's: run it against two
// builds side by side, e.g.
//
//	flock /tmp/electord-bench.lock go test ./node -run '^$' -bench NamedIdleCPU/bully -benchtime 1x
//
// resent-copies counts the candidacy copies the anti-entropy's rounds sent
// in the window (at rest: 0); ELECTORD_BENCH_OBSERVERS=1 makes node 5 an
// observer (its app stands in nothing), whose digests keep it at 0 too.
//
// ELECTORD_BENCH_IDLEPROFILE=FILE writes a CPU profile of the idle window
// alone to FILE.bully and FILE.ring; ELECTORD_BENCH_IDLEMSGS=1 logs the
// peer messages of the window by type, per node and second.
func BenchmarkNamedIdleCPU(b *testing.B) {
	k := benchElections()
	for _, algo := range []string{"bully", "ring"} {
		b.Run(algo, func(b *testing.B) {
			for range b.N {
				agree, cpu, rs := namedIdleCPU(b, algo, k)
				b.ReportMetric(agree.Seconds(), "agree-s")
				b.ReportMetric(cpu, "idle-%core/node")
				b.ReportMetric(float64(rs.resent), "resent-copies")
				b.ReportMetric(float64(rs.differed), "digests-differed")
			}
		})
	}
}

// namedIdleCPU also returns what the candidacies' anti-entropy did in the
// window, over all nodes: at rest it should send digests only.
func namedIdleCPU(b *testing.B, algo string, k int) (time.Duration, float64, resendTally) {
	const nodes, window = 5, 10 * time.Second
	c, _, agree := restingNamedCluster(b, algo, k)
	time.Sleep(2 * time.Second) // settle: the measurement is of an idle cluster
	// A CPU profile of the idle window alone (the benchmark's own
	// -cpuprofile covers the start too).
	stop := recordTo(b, "ELECTORD_BENCH_IDLEPROFILE", algo, pprof.StartCPUProfile, pprof.StopCPUProfile)
	tally := tallyMessages(b, c)
	rs0 := c.resendCounts(b)
	before := cpuTime(b)
	t0 := time.Now()
	time.Sleep(window)
	used := cpuTime(b) - before
	stop()
	tally(time.Since(t0) * nodes)
	rs := c.resendCounts(b)
	rs.resent, rs.differed = rs.resent-rs0.resent, rs.differed-rs0.differed
	return agree, 100 * used.Seconds() / time.Since(t0).Seconds() / nodes, rs
}

// resendCounts sums the nodes' resend counters.
func (c *cluster) resendCounts(b testing.TB) (sum resendTally) {
	for _, nd := range c.nodes {
		k := resendCounts(b, nd)
		sum.resent, sum.unchanged = sum.resent+k.resent, sum.unchanged+k.unchanged
		sum.digests, sum.differed = sum.digests+k.digests, sum.differed+k.differed
	}
	return sum
}

// cpuTime is the process's user and system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tallyMessages counts, when ELECTORD_BENCH_IDLEMSGS is set, the peer
// messages c's network carries from now on, by type and by whether they
// belong to a named election, and returns the function that logs them as
// rates over per (the window times the nodes: per node and second).
func tallyMessages(b *testing.B, c *cluster) func(per time.Duration) {
	if os.Getenv("ELECTORD_BENCH_IDLEMSGS") == "" {
		return func(time.Duration) {}
	}
	type kind struct {
		t     election.MsgType
		named bool
	}
	var mu sync.Mutex
	n := map[kind]int{}
	c.net.SetHook(func(m election.Message) bool {
		mu.Lock()
		n[kind{m.Type, m.Election != ""}]++
		mu.Unlock()
		return true
	})
	return func(per time.Duration) {
		c.net.SetHook(nil)
		mu.Lock()
		defer mu.Unlock()
		for k, v := range n {
			b.Logf("%v (named %v): %.1f per node and second", k.t, k.named, float64(v)/per.Seconds())
		}
	}
}
