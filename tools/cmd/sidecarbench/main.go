// Command sidecarbench measures the sidecar's GET /leader side by side with a
// bare net/http handler serving the same bytes (issue 14): one electord
// process (a cluster of one, so it leads) with --health-addr on, scraped
// like Prometheus (/metrics every second) and probed like a kubelet
// (/readyz and /livez every 2 s) and with a status page's event stream open
// throughout; the same load tool (wrk), the
// same run, the two targets alternating, medians over the runs.
//
//	go -C tools run ./cmd/sidecarbench -runs 7 -duration 5s
//
// wrk must be installed (Debian: apt-get install -y wrk).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"github.com/electord/electord/tools/internal/repo"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("electord", "", "electord binary (default: build ./cmd/electord of the repository this runs in)")
	runs := flag.Int("runs", 7, "runs per target")
	dur := flag.Duration("duration", 5*time.Second, "each wrk run")
	threads := flag.Int("threads", 2, "wrk threads")
	conns := flag.Int("conns", 32, "wrk connections")
	scrape := flag.Bool("scrape", true, "run electord with --health-addr, scrape /metrics every 1 s and probe /readyz and /livez every 2 s during the runs (false: health-addr off)")
	statusPage := flag.Bool("status", true, "with -scrape, hold a status page's event stream (/status/events) open")
	flag.Parse()
	if err := run(*bin, *runs, *dur, *threads, *conns, *scrape, *statusPage); err != nil {
		fmt.Fprintln(os.Stderr, "sidecarbench:", err)
		os.Exit(1)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type result struct {
	rps            float64
	p50, p99       time.Duration
	non2xx, errors int
}

func run(bin string, runs int, dur time.Duration, threads, conns int, scrape, statusPage bool) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk is not installed (apt-get install -y wrk): %w", err)
	}
	dir, err := os.MkdirTemp("", "sidecarbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "electord")
		if err := repo.Build(bin, false, "./cmd/electord"); err != nil {
			return fmt.Errorf("building electord: %w", err)
		}
	}
	var addrs [5]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return err
		}
	}
	api, peer, gossip, side, health := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4]
	args := []string{"--id", "1", "--api-addr", api, "--peer-addr", peer, "--gossip-addr", gossip,
		"--http-addr", side, "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn"}
	if scrape {
		args = append(args, "--health-addr", health)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	}()

	// The sidecar's answer once the node leads: the bytes and headers the
	// bare handler will serve.
	var body []byte
	var header http.Header
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + side + "/leader")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				body, header = b, resp.Header
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("electord at %s did not answer /leader 200 within 20 s (%v)", side, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bareLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bare := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			if k != "Date" && k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.Write(body)
	})}
	go bare.Serve(bareLis)
	defer bare.Close()
	// Check the two answers are the same bytes.
	resp, err := http.Get("http://" + bareLis.Addr().String() + "/leader")
	if err != nil {
		return err
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, body) {
		return fmt.Errorf("the bare handler serves %q, the sidecar %q", got, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var scrapes, scrapeErrs int
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		if !scrape {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			paths := []string{"/metrics"}
			if i%2 == 0 {
				paths = append(paths, "/readyz", "/livez")
			}
			for _, p := range paths {
				resp, err := http.Get("http://" + health + p)
				if err != nil || resp.StatusCode != 200 {
					scrapeErrs++
				}
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				scrapes++
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	// An open status page: its event stream (the binary may have none).
	statusOpen := "no"
	if scrape && statusPage {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+health+"/status/events", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			if resp.StatusCode == 200 {
				statusOpen = "yes"
				go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
			} else {
				resp.Body.Close()
			}
		}
	}

	targets := []struct{ name, url string }{
		{"sidecar GET /leader", "http://" + side + "/leader"},
		{"bare net/http, same bytes", "http://" + bareLis.Addr().String() + "/leader"},
	}
	res := make([][]result, len(targets))
	fmt.Printf("electord %s, %d bytes: %s\n", side, len(body), body)
	fmt.Printf("wrk -t%d -c%d -d%v, %d runs per target, alternating; GOMAXPROCS %d, %d CPUs\n",
		threads, conns, dur, runs, runtime.GOMAXPROCS(0), runtime.NumCPU())
	for r := range runs {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			x, err := wrk(targets[i].url, threads, conns, dur)
			if err != nil {
				return err
			}
			res[i] = append(res[i], x)
			fmt.Printf("run %d %-28s %9.0f req/s  p50 %-9v p99 %-9v non-2xx %d errors %d\n", r+1, targets[i].name, x.rps, x.p50, x.p99, x.non2xx, x.errors)
		}
	}
	cancel()
	<-scraped
	fmt.Println()
	med := make([]result, len(targets))
	for i, t := range targets {
		med[i] = median(res[i])
		fmt.Printf("median %-28s %9.0f req/s  p50 %-9v p99 %v\n", t.name, med[i].rps, med[i].p50, med[i].p99)
	}
	// Each round ran the two targets back to back: the ratio within a
	// round is less exposed to a host whose load changes than the ratio of
	// the medians.
	var paired []float64
	for r := range runs {
		paired = append(paired, res[0][r].rps/res[1][r].rps)
	}
	slices.Sort(paired)
	fmt.Printf("per-round ratio sidecar/bare: median %.2f, range %.2f-%.2f\n", paired[len(paired)/2], paired[0], paired[len(paired)-1])
	fmt.Printf("ratio sidecar/bare %.2f; health server scraped %d times (%d failed); a status page event stream open: %s\n",
		med[0].rps/med[1].rps, scrapes, scrapeErrs, statusOpen)
	for i := range targets {
		for _, x := range res[i] {
			if x.non2xx > 0 || x.errors > 0 {
				return fmt.Errorf("%s: a run had non-2xx answers or socket errors", targets[i].name)
			}
		}
	}
	return nil
}

var (
	rpsRe     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	latRe     = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	non2xxRe  = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	sockErrRe = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func wrk(url string, threads, conns int, dur time.Duration) (result, error) {
	out, err := exec.Command("wrk", "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(int(dur.Seconds()))+"s", "--latency", url).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk %s: %v\n%s", url, err, out)
	}
	var x result
	m := rpsRe.FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("wrk %s: no Requests/sec in\n%s", url, out)
	}
	x.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	for _, l := range latRe.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(l[2]), 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(l[3])]
		d := time.Duration(v * float64(unit)).Round(time.Microsecond)
		if string(l[1]) == "50" {
			x.p50 = d
		} else {
			x.p99 = d
		}
	}
	if m := non2xxRe.FindSubmatch(out); m != nil {
		x.non2xx, _ = strconv.Atoi(string(m[1]))
	}
	if m := sockErrRe.FindSubmatch(out); m != nil {
		for _, g := range m[1:] {
			n, _ := strconv.Atoi(string(g))
			x.errors += n
		}
	}
	return x, nil
}

func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		rps: pick(func(r result) float64 { return r.rps }),
		p50: time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99: time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
	}
}
