package node

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// BenchmarkNamedMassFailover: five in-process nodes (memory transport, the
// product's timings), every node's app standing in N elections on one
// stream (ELECTORD_BENCH_ELECTIONS, default 1,000), agreed and at rest;
// then the node leading them crashes as a SIGKILL looks over gRPC
// (transport.Network.Crash: its peers are told at once, its sends stop).
// Reported: when the observer (the lowest survivor) saw a new leader in
// each of the crashed node's elections, by its watch (p50-ms, p99-ms), and
// when every survivor agreed on one in all of them (all-ms), polled every
// 5 ms once the observer saw them all; and the CPU the process used from
// the crash until the observer saw them all (cpu-ms), the failover's work,
// which varies less between runs than its length, and the bytes it
// allocated meanwhile (alloc-MiB) and the survivors' publishes of a named
// election's view (publishes), which vary less still. The loops' own cost of a mass failover without gRPC's:
//
//	go test ./node -run '^$' -bench NamedMassFailover -benchtime 1x
//
// ELECTORD_BENCH_FAILOVERPROFILE=FILE writes a CPU profile of the failover
// to FILE.bully and FILE.ring (ELECTORD_BENCH_FAILOVEREXECTRACE=FILE an
// execution trace, ELECTORD_BENCH_FAILOVERALLOCS=FILE heap profiles before
// and after, see writeHeap); ELECTORD_BENCH_FAILOVERTRACE=1 logs, every
// 10 ms for 2 s, how many of the elections each survivor leads and sees
// led by a live node, and at the end each node's named messages lost to a
// full inbox.
func BenchmarkNamedMassFailover(b *testing.B) {
	k := benchElections()
	for _, algo := range []string{"bully", "ring"} {
		b.Run(algo, func(b *testing.B) {
			for range b.N {
				seen, all, cpu, alloc, pubs := namedMassFailover(b, algo, k)
				b.ReportMetric(float64(percentile(seen, .5).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(percentile(seen, .99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(all.Microseconds())/1000, "all-ms")
				b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms")
				b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
				b.ReportMetric(float64(pubs), "publishes")
			}
		})
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func namedMassFailover(b *testing.B, algo string, k int) (seen []time.Duration, all, cpu time.Duration, alloc, pubs uint64) {
	c, opts, _ := restingNamedCluster(b, algo, k)
	time.Sleep(2 * time.Second) // at rest: quiet followers
	byLeader := map[election.NodeID][]string{}
	for _, o := range opts {
		li, _ := c.nodes[1].ElectionLeader(o.Election)
		byLeader[li.ID] = append(byLeader[li.ID], o.Election)
	}
	var victim election.NodeID
	for id, names := range byLeader {
		if len(names) > len(byLeader[victim]) {
			victim = id
		}
	}
	names := byLeader[victim]
	observer := election.NodeID(1)
	if victim == 1 {
		observer = 2
	}
	var mu sync.Mutex
	var t0 time.Time
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range names {
		w, err := c.nodes[observer].WatchElection(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for li := range w.C() {
				if li.HasLeader() && li.ID != victim {
					mu.Lock()
					seen = append(seen, time.Since(t0))
					mu.Unlock()
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the watches' first events (the current leader) delivered
	defer recordTo(b, "ELECTORD_BENCH_FAILOVERPROFILE", algo, pprof.StartCPUProfile, pprof.StopCPUProfile)()
	defer recordTo(b, "ELECTORD_BENCH_FAILOVEREXECTRACE", algo, trace.Start, trace.Stop)()
	mu.Lock()
	t0 = time.Now()
	mu.Unlock()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cpu0, alloc0 := cpuTime(b), ms.TotalAlloc
	publishes := func() (sum uint64) {
		for id, nd := range c.nodes {
			if id != victim {
				sum += nd.named.publishes.Load()
			}
		}
		return sum
	}
	pubs0 := publishes()
	writeHeap(b, "before")
	c.net.Crash(victim)
	if os.Getenv("ELECTORD_BENCH_FAILOVERTRACE") != "" {
		stop := traceMessages(b, c, victim)
		defer stop()
		go func() {
			for time.Since(t0) < 2*time.Second {
				var parts []string
				for id, nd := range c.nodes {
					if id == victim {
						continue
					}
					led, moved := 0, 0
					for _, name := range names {
						li, _ := nd.ElectionLeader(name)
						if li.Self {
							led++
						}
						if li.HasLeader() && li.ID != victim {
							moved++
						}
					}
					parts = append(parts, fmt.Sprintf("n%d led %d moved %d", id, led, moved))
				}
				slices.Sort(parts)
				b.Logf("%v: %v", time.Since(t0).Round(time.Millisecond), parts)
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	// The survivors are polled once the observer has seen every election
	// move (polling 4 × N views every few ms meanwhile cost the failover a
	// sixth of its CPU).
	watched := make(chan struct{})
	go func() { wg.Wait(); close(watched) }()
	select {
	case <-watched:
	case <-time.After(20 * time.Second):
	}
	cpu = cpuTime(b) - cpu0
	runtime.ReadMemStats(&ms)
	alloc, pubs = ms.TotalAlloc-alloc0, publishes()-pubs0
	writeHeap(b, "after")
	for {
		left, firstLeft := 0, ""
		for _, name := range names {
			var first LeaderInfo
			for id, nd := range c.nodes {
				if id == victim {
					continue
				}
				li, _ := nd.ElectionLeader(name)
				if !li.HasLeader() || li.ID == victim || first.HasLeader() && (li.ID != first.ID || li.Term != first.Term) {
					if left == 0 {
						firstLeft = name
					}
					left++
					break
				}
				first = li
			}
		}
		if left == 0 {
			all = time.Since(t0)
			break
		}
		if time.Since(t0) > 20*time.Second {
			for id, nd := range c.nodes {
				if id != victim {
					b.Logf("%s on node %d: %s", firstLeft, id, dumpNamed(nd, firstLeft))
				}
			}
			b.Fatalf("%s: 20 s after node %d crashed, %d of the %d elections it led have no agreed new leader", algo, victim, left, len(names))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if os.Getenv("ELECTORD_BENCH_FAILOVERTRACE") != "" {
		for id, nd := range c.nodes {
			b.Logf("node %d: named messages lost to a full inbox %d", id, nd.counters.NamedBackpressure.Load())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(names) {
		b.Fatalf("%s: the observer saw a new leader in %d of %d elections", algo, len(seen), len(names))
	}
	return seen, all, cpu, alloc, pubs
}

// writeHeap writes a heap profile to $ELECTORD_BENCH_FAILOVERALLOCS.what,
// if that is set: the failover's allocations are the difference of the
// "after" and "before" profiles (go tool pprof -sample_index=alloc_space
// -diff_base FILE.before BIN FILE.after).
func writeHeap(b *testing.B, what string) {
	path := os.Getenv("ELECTORD_BENCH_FAILOVERALLOCS")
	if path == "" {
		return
	}
	f, err := os.Create(path + "." + what)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC() // the profile shows the allocations as of the last GC
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// dumpNamed says what node nd holds of election name: its machine's
// status and the candidates its table knows.
func dumpNamed(nd *Node, name string) string {
	var out string
	nd.do(context.Background(), func() error {
		out = fmt.Sprintf("table %v", nd.named.table.Members(name))
		if nm := nd.named.machines[name]; nm != nil {
			out += fmt.Sprintf(", machine %+v", nm.sm.Status())
		}
		return nil
	})
	return out
}

// traceMessages logs, every second until stopped, the named messages the
// live nodes sent by type, and the inbox refusals and named back-pressure
// each counted meanwhile: what a failover that does not settle spends its
// loops on.
func traceMessages(b *testing.B, c *cluster, victim election.NodeID) (stop func()) {
	var mu sync.Mutex
	sent := map[string]int{}
	c.net.SetHook(func(m election.Message) bool {
		if m.Election != "" && m.From != victim {
			k := fmt.Sprintf("%v %d>%d", m.Type, m.From, m.To)
			if m.Type == election.MsgCandidacy && m.Term != 0 {
				k += " leads"
			}
			mu.Lock()
			sent[k]++
			mu.Unlock()
		}
		return true
	})
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := map[election.NodeID][2]uint64{}
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			mu.Lock()
			line := fmt.Sprint(sent)
			clear(sent)
			mu.Unlock()
			for id, nd := range c.nodes {
				if id == victim {
					continue
				}
				now := [2]uint64{nd.counters.InboxFull.Load(), nd.counters.NamedBackpressure.Load()}
				line += fmt.Sprintf(" n%d refused %d backpressure %d", id, now[0]-last[id][0], now[1]-last[id][1])
				last[id] = now
			}
			b.Logf("messages in the last second: %s", line)
		}
	}()
	return func() { close(done); c.net.SetHook(nil) }
}
