package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// metricValue is the value of one sample in a Prometheus text exposition,
// matched by its name and labels as written ("electord_role{role=\"leader\"}");
// -1 when absent.
func metricValue(body, sample string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// TestProcessOps: three electord processes with --log-format json and
// --health-addr. Every node, followers too, is ready (/readyz 200); the
// metrics a real scrape reads follow a SIGTERM of the leader (the new
// leader's role and term, its leader changes); and every line each process
// wrote to stderr, start to shutdown, is one JSON object with time, level
// and msg.
func TestProcessOps(t *testing.T) {
	dir := t.TempDir()
	var ps []*proc
	health := map[int]string{}
	for i := 1; i <= 3; i++ {
		p := newProc(t, dir, i, "bully")
		health[i] = loopback(freePort(t))
		p.extra = []string{"--log-format", "json", "--health-addr", health[i]}
		if i > 1 {
			p.join = []string{ps[0].gossip}
		}
		ps = append(ps, p)
	}
	cleanupProcs(t, ps)
	for _, p := range ps {
		p.start()
	}
	old := waitProcAgreement(t, ps, 20*time.Second, "three processes agree on a leader", nil)
	for _, p := range ps {
		eventually(t, 10*time.Second, "node ready", func() (bool, string) {
			code, body := httpGet(t, "http://"+health[p.id]+"/readyz")
			return code == 200, strconv.Itoa(code) + " " + string(body)
		})
	}
	_, body := httpGet(t, "http://"+health[int(old.ID)]+"/metrics")
	if metricValue(string(body), `electord_role{role="leader"}`) != 1 || metricValue(string(body), "electord_leader_term") != float64(old.Term) {
		t.Errorf("the leader's /metrics: role leader %v, leader_term %v (term %d)",
			metricValue(string(body), `electord_role{role="leader"}`), metricValue(string(body), "electord_leader_term"), old.Term)
	}
	var rest []*proc
	changes := map[int]float64{}
	for _, p := range ps {
		if p.id != int(old.ID) {
			rest = append(rest, p)
			_, b := httpGet(t, "http://"+health[p.id]+"/metrics")
			changes[p.id] = metricValue(string(b), "electord_leader_changes_total")
		}
	}

	// SIGTERM the leader: it hands over, the others follow the new leader.
	if err := procByID(ps, old.ID).signal(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	now := waitProcAgreement(t, rest, 10*time.Second, "the others agree on a new leader",
		func(li client.LeaderInfo) bool { return li.ID != old.ID })
	for _, p := range rest {
		_, b := httpGet(t, "http://"+health[p.id]+"/metrics")
		m := string(b)
		role := "follower"
		if p.id == int(now.ID) {
			role = "leader"
		}
		if metricValue(m, `electord_role{role="`+role+`"}`) != 1 || metricValue(m, "electord_leader_term") != float64(now.Term) ||
			metricValue(m, "electord_leader_changes_total") <= changes[p.id] {
			t.Errorf("node %d after the handover: role %s %v, leader_term %v (want %d), leader_changes_total %v (was %v)", p.id, role,
				metricValue(m, `electord_role{role="`+role+`"}`), metricValue(m, "electord_leader_term"), now.Term,
				metricValue(m, "electord_leader_changes_total"), changes[p.id])
		}
	}
	for _, p := range rest {
		p.stop()
	}

	for _, p := range ps {
		f, err := os.Open(p.logPath)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		lines, msgs := 0, map[string]bool{}
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "=== ") {
				continue // the test's own markers (proc.start)
			}
			lines++
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("node %d: a stderr line is not one JSON object (%v): %q", p.id, err, line)
				continue
			}
			for _, k := range []string{"time", "level", "msg"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("node %d: no %q in %q", p.id, k, line)
				}
			}
			msg, _ := rec["msg"].(string)
			msgs[msg] = true
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if lines == 0 || !msgs["electord started"] || !msgs["leadership changed"] {
			t.Errorf("node %d: %d JSON lines; started logged %v, leadership change logged %v", p.id, lines,
				msgs["electord started"], msgs["leadership changed"])
		}
	}
}
