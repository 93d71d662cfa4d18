package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Profiling the nodes a bench starts, for finding where a figure's time
// goes (docs/OPERATIONS.md, "Profiling a node"). Both need an electord
// built with -tags electord_pprof:
//
//   - ELECTBENCH_PPROF_PORT=P serves node id's net/http/pprof on
//     127.0.0.1:P+id;
//   - ELECTBENCH_CRASH_PROFILES=DIR (with the above) makes `shards` fetch an
//     execution trace and a CPU profile of every survivor over the crash,
//     into DIR/{trace,cpu}-node-ID.out;
//   - ELECTBENCH_START_PROFILES=DIR the same of every node over the first
//     ten seconds of the start (the campaigns opening).

// pprofAddr is node id's profiling address, or "" when not asked for.
func pprofAddr(id uint64) string {
	base, err := strconv.Atoi(os.Getenv("ELECTBENCH_PPROF_PORT"))
	if err != nil || base <= 0 {
		return ""
	}
	return fmt.Sprintf("127.0.0.1:%d", base+int(id))
}

// profileNodes starts fetching a trace and a CPU profile of span from every
// proc in ps, and returns a wait for them all; a no-op unless the
// environment variable env names a directory. Fetch errors are logged, not
// returned: a profile is a help, not a figure.
func profileNodes(env string, ps []*proc, span time.Duration) (wait func()) {
	dir := os.Getenv(env)
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	secs := int(span.Seconds())
	for _, p := range ps {
		addr := pprofAddr(p.id)
		if addr == "" {
			logf("%s needs ELECTBENCH_PPROF_PORT", env)
			break
		}
		for kind, path := range map[string]string{"trace": "trace", "cpu": "profile"} {
			url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, path, secs)
			file := filepath.Join(dir, fmt.Sprintf("%s-node-%d.out", kind, p.id))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fetchTo(url, file); err != nil {
					logf("profile %s: %v", url, err)
				}
			}()
		}
	}
	// Let the fetches reach the nodes before the caller goes on.
	time.Sleep(100 * time.Millisecond)
	return wg.Wait
}

func fetchTo(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
