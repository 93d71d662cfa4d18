package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/electord/electord/tools/internal/repo"
)

// TestEtcdAppsKills runs etcd's side of `vsetcd apps` small: three members,
// three candidate processes, two SIGKILLs of the leading one. Each kill must
// give the observer on another member a new leader, and not before the
// killed candidate's lease can have expired: its client renewed it every
// TTL/3 rounded up to the keep-alive loop's 500 ms wake-ups, so at least
// TTL − TTL/3 − 500 ms of it was left. The floor checked is lower still
// (TTL/4), for a loaded host that delays a renewal; a new leader sooner
// would mean the harness timed something other than the lease's expiry.
func TestEtcdAppsKills(t *testing.T) {
	etcdPath, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd server on PATH (Debian: apt-get install etcd-server)")
	}
	dir := t.TempDir()
	candBin := filepath.Join(dir, "etcdcandidate")
	if err := repo.BuildTool(candBin, false, "./cmd/etcdcandidate"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(killAll)
	et, err := startEtcd(etcdPath, candBin, dir, 3, 3, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer et.stop()
	kills, err := et.killLeaders(2, 100*time.Millisecond, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(kills) != 2 {
		t.Fatalf("%d kills measured, want 2", len(kills))
	}
	floor := time.Duration(et.ttl) * time.Second / 4
	for _, k := range kills {
		if k.failed != "" || k.new == "" || k.new == k.old || k.observer == "" {
			t.Errorf("kill %d: %+v", k.n, k)
		}
		if k.d < floor || k.d > 15*time.Second {
			t.Errorf("kill %d: new leader after %v; a lease of %d s does not expire that soon (floor %v)", k.n, k.d, et.ttl, floor)
		}
	}
}
