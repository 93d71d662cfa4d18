// Command electbench measures electord with real processes on loopback.
//
//	electbench failover  [--nodes 5] [--kills 30] [--algorithms bully,ring]
//	electbench stability [--duration 10m] [--hogs 2]
//
// failover starts the electord processes with the default configuration,
// SIGKILLs the leader again and again, and for each kill measures the time
// until every survivor's watch reports the same new leader with a higher
// term; then the same for a graceful resign and for a transfer. stability
// counts leader changes on a healthy cluster while CPU hogs saturate every
// core. electord is built from this module unless --electord names a binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "failover":
		err = failover(os.Args[2:])
	case "stability":
		err = stability(os.Args[2:])
	case "hog":
		hog()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "electbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: electbench failover|stability [flags]  (-h for flags)")
	os.Exit(2)
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

// electordBinary builds cmd/electord unless path is given.
func electordBinary(path string) (string, func(), error) {
	if path != "" {
		return path, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "electbench-bin-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "electord")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/electord/electord/cmd/electord")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building electord: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

type samples []time.Duration

func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(p*float64(len(c)) + 0.5)
	return c[min(max(i-1, 0), len(c)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// common are the flags both measurements take.
type common struct {
	nodes        *int
	algos, extra *string
	bin          *string
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		nodes: fs.Int("nodes", 5, "electord processes"),
		algos: fs.String("algorithms", "bully,ring", "algorithms to measure"),
		bin:   fs.String("electord", "", "electord binary (default: build cmd/electord)"),
		extra: fs.String("args", "", "extra electord flags, space-separated (default config when empty)"),
	}
}

// setup parses args and finds (or builds) electord; call cleanup when done.
func setup(fs *flag.FlagSet, args []string, c common) (path string, cleanup func(), err error) {
	fs.Parse(args)
	return electordBinary(*c.bin)
}

func failover(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ExitOnError)
	cf := commonFlags(fs)
	kills := fs.Int("kills", 30, "SIGKILLs of the leader per algorithm (also the number of resigns and transfers)")
	path, cleanup, err := setup(fs, args, cf)
	if err != nil {
		return err
	}
	defer cleanup()
	nodes, algos, extra := cf.nodes, cf.algos, cf.extra
	type row struct {
		algo, op string
		s        samples
		failed   int
	}
	var rows []row
	for _, algo := range strings.Split(*algos, ",") {
		c, err := startCluster(path, algo, *nodes, strings.Fields(*extra), logf)
		if err != nil {
			return err
		}
		res, err := measure(c, *kills)
		c.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", algo, err)
		}
		for _, op := range []string{"crash (SIGKILL)", "resign", "transfer"} {
			rows = append(rows, row{algo, op, res[op].s, res[op].failed})
		}
	}
	fmt.Printf("\nfailover with %d electord processes, default config, %s/%s, GOMAXPROCS=%d\n\n", *nodes, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	fmt.Println("| algorithm | event | runs | p50 ms | p99 ms | max ms | failed |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %d | %s | %s | %s | %d |\n", r.algo, r.op, len(r.s), ms(r.s.pct(0.5)), ms(r.s.pct(0.99)), ms(r.s.pct(1)), r.failed)
	}
	return nil
}

type result struct {
	s      samples
	failed int
}

func measure(c *cluster, runs int) (map[string]*result, error) {
	res := map[string]*result{"crash (SIGKILL)": {}, "resign": {}, "transfer": {}}
	if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
		return nil, fmt.Errorf("first election: %w", err)
	}
	for i := range runs {
		old, _, err := c.waitAgreed(30*time.Second, anyLeader)
		if err != nil {
			return nil, err
		}
		leader := c.proc(old.Id)
		t0 := time.Now()
		c.kill(leader)
		_, at, err := c.waitAgreed(10*time.Second, func(v *pb.LeaderInfo) bool { return v.Id != old.Id && v.Term > old.Term })
		if err != nil {
			res["crash (SIGKILL)"].failed++
			logf("kill %d: %v", i+1, err)
		} else {
			res["crash (SIGKILL)"].s = append(res["crash (SIGKILL)"].s, at.Sub(t0))
			logf("kill %d: leader %d down, new leader after %s ms", i+1, old.Id, ms(at.Sub(t0)))
		}
		if err := c.start(leader); err != nil {
			return nil, err
		}
		if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
			return nil, fmt.Errorf("after restarting node %d: %w", leader.id, err)
		}
	}
	for i := range runs {
		for _, op := range []string{"resign", "transfer"} {
			old, _, err := c.waitAgreed(30*time.Second, anyLeader)
			if err != nil {
				return nil, err
			}
			leader := c.proc(old.Id)
			var target uint64
			for target == 0 || target == old.Id {
				target = uint64(1 + rand.IntN(len(c.procs)))
			}
			ok := func(v *pb.LeaderInfo) bool { return v.Id != old.Id && v.Term > old.Term }
			if op == "transfer" {
				ok = func(v *pb.LeaderInfo) bool { return v.Id == target && v.Term > old.Term }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t0 := time.Now()
			if op == "resign" {
				_, err = leader.client.Resign(ctx, &pb.ResignRequest{})
			} else {
				_, err = leader.client.Transfer(ctx, &pb.TransferRequest{Id: target})
			}
			cancel()
			if err == nil {
				var at time.Time
				if _, at, err = c.waitAgreed(10*time.Second, ok); err == nil {
					res[op].s = append(res[op].s, at.Sub(t0))
					logf("%s %d: %s ms", op, i+1, ms(at.Sub(t0)))
					continue
				}
			}
			res[op].failed++
			logf("%s %d: %v", op, i+1, err)
		}
	}
	return res, nil
}

func stability(args []string) error {
	fs := flag.NewFlagSet("stability", flag.ExitOnError)
	cf := commonFlags(fs)
	duration := fs.Duration("duration", 10*time.Minute, "how long to watch")
	hogs := fs.Int("hogs", runtime.NumCPU(), "CPU hog processes (each spins one core)")
	path, cleanup, err := setup(fs, args, cf)
	if err != nil {
		return err
	}
	defer cleanup()
	nodes, algos, extra := cf.nodes, cf.algos, cf.extra
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Println("| algorithm | duration | CPU hogs | spurious leader changes (sum over nodes' watches) |")
	fmt.Println("|---|---|---:|---:|")
	for _, algo := range strings.Split(*algos, ",") {
		c, err := startCluster(path, algo, *nodes, strings.Fields(*extra), logf)
		if err != nil {
			return err
		}
		if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
			c.stop()
			return err
		}
		for _, p := range c.procs {
			p.mu.Lock()
			p.changes = 0
			p.mu.Unlock()
		}
		var hogProcs []*exec.Cmd
		for range *hogs {
			h := exec.Command(self, "hog")
			if err := h.Start(); err != nil {
				return err
			}
			hogProcs = append(hogProcs, h)
		}
		time.Sleep(*duration) // the measurement window itself
		for _, h := range hogProcs {
			h.Process.Signal(syscall.SIGKILL)
			h.Wait()
		}
		changes := 0
		for _, p := range c.procs {
			p.mu.Lock()
			changes += p.changes
			p.mu.Unlock()
		}
		c.stop()
		fmt.Printf("| %s | %v | %d | %d |\n", algo, *duration, *hogs, changes)
	}
	return nil
}

// hog spins one core until killed.
func hog() {
	runtime.GOMAXPROCS(1)
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(errors.New("unreachable"))
		}
	}
}
