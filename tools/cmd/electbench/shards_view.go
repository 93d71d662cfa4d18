package main

// What `electbench shards` reads from the nodes, and the pure summaries it
// makes of it (tested in shards_test.go): every node's list of elections,
// whether they agree, leaders per node, leaderships moved, and the Go heap
// from /metrics.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

// lead is one election's leadership as one node lists it.
type lead struct {
	id, term uint64
}

// nodeList is one node's ListElections answer (named elections only), with
// when the request left and its answer arrived: a change it shows happened
// before got, and an answer's timestamp is exact to got-sent.
type nodeList struct {
	node      uint64
	leads     map[string]lead
	sent, got time.Time
	err       error
}

// listPage is the page size listOf asks for: a node's largest.
const listPage = 1000

// listPageWithin bounds one page of a listing.
const listPageWithin = 10 * time.Second

// listOf asks p for its elections.
func listOf(ctx context.Context, p *proc) nodeList {
	l := nodeList{node: p.id, sent: time.Now()}
	// A node answers a page at a time (at most 1,000 elections): follow
	// the pages to the end. Without this the harness saw only the first
	// page (100 by default) and any election after it as leaderless. Each
	// page has its own deadline: at 100,000 elections, on a loaded host,
	// the hundred pages of one listing took longer than one deadline for
	// them all.
	l.leads = make(map[string]lead)
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, listPageWithin)
		r, err := p.client.ListElections(cctx, &pb.ListElectionsRequest{PageSize: listPage, PageToken: token}, largeAnswers)
		cancel()
		if err != nil {
			l.got = time.Now()
			l.err = fmt.Errorf("node %d: ListElections: %w", p.id, err)
			return l
		}
		for _, e := range r.GetElections() {
			l.leads[e.GetElection()] = lead{e.GetLeader().GetId(), e.GetLeader().GetTerm()}
		}
		if token = r.GetNextPageToken(); token == "" {
			break
		}
	}
	l.got = time.Now()
	return l
}

// agreement checks that every list shows every name with a leader, the same
// (node, term) in every list; on success it returns the leadership of each
// name, else why not (the first disagreement, and how many names lack one).
func agreement(lists []nodeList, names []string) (map[string]lead, string) {
	if len(lists) == 0 {
		return nil, "no node answered"
	}
	for _, l := range lists {
		if l.err != nil {
			return nil, l.err.Error()
		}
	}
	out := make(map[string]lead, len(names))
	bad, why := 0, ""
	for _, name := range names {
		first, ok := lists[0].leads[name]
		agreed := ok && first.id != 0
		if !agreed && why == "" {
			why = fmt.Sprintf("%s: node %d shows no leader", name, lists[0].node)
		}
		for _, l := range lists[1:] {
			if !agreed {
				break
			}
			if v := l.leads[name]; v != first {
				agreed = false
				if why == "" {
					why = fmt.Sprintf("%s: node %d shows %d/%d, node %d %d/%d", name, lists[0].node, first.id, first.term, l.node, v.id, v.term)
				}
			}
		}
		if !agreed {
			bad++
			continue
		}
		out[name] = first
	}
	if bad > 0 {
		return nil, fmt.Sprintf("%d of %d elections not agreed (first: %s)", bad, len(names), why)
	}
	return out, ""
}

// leaderless counts the names that some list shows with no leader, or led
// by dead (a node that is gone).
func leaderless(lists []nodeList, names []string, dead uint64) int {
	n := 0
	for _, name := range names {
		for _, l := range lists {
			if v := l.leads[name]; v.id == 0 || v.id == dead {
				n++
				break
			}
		}
	}
	return n
}

// perNode counts the leaderships each node holds.
func perNode(leads map[string]lead) map[uint64]int {
	n := map[uint64]int{}
	for _, l := range leads {
		n[l.id]++
	}
	return n
}

// spreadString shows leaderships per node in node order, and max/min over
// the given nodes (a node that leads none makes it "inf").
func spreadString(leads map[string]lead, nodes []uint64) string {
	n := perNode(leads)
	var parts []string
	lo, hi := -1, 0
	for _, id := range nodes {
		parts = append(parts, fmt.Sprintf("n%d:%d", id, n[id]))
		if lo < 0 || n[id] < lo {
			lo = n[id]
		}
		hi = max(hi, n[id])
	}
	ratio := "inf"
	if lo > 0 {
		ratio = fmt.Sprintf("%.2f", float64(hi)/float64(lo))
	}
	return strings.Join(parts, " ") + " (max/min " + ratio + ")"
}

// balanced reports whether the leaderships over nodes are within
// max/min ≤ 1 + imbalance, every node leading some.
func balanced(leads map[string]lead, nodes []uint64, imbalance float64) bool {
	n := perNode(leads)
	lo, hi := -1, 0
	for _, id := range nodes {
		if lo < 0 || n[id] < lo {
			lo = n[id]
		}
		hi = max(hi, n[id])
	}
	return lo > 0 && float64(hi) <= (1+imbalance)*float64(lo)
}

// minMoves is the least number of leaderships that must move to split
// leads evenly over nodes (the remainder's extra one kept by the nodes
// that lead most, as the nodes' rebalancing plans it): what each node
// leads above its share.
func minMoves(leads map[string]lead, nodes []uint64) int {
	n := perNode(leads)
	order := slices.Clone(nodes)
	slices.SortStableFunc(order, func(a, b uint64) int { return n[b] - n[a] })
	total := 0
	for _, id := range nodes {
		total += n[id]
	}
	share, extra, moves := total/len(nodes), total%len(nodes), 0
	for i, id := range order {
		want := share
		if i < extra {
			want++
		}
		moves += max(0, n[id]-want)
	}
	return moves
}

// moved counts the elections whose leading node differs between a and b
// (an election missing from either counts as moved).
func moved(a, b map[string]lead) int {
	n := 0
	for name, l := range a {
		if m, ok := b[name]; !ok || m.id != l.id {
			n++
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			n++
		}
	}
	return n
}

// shardNames names the benchmark's n elections shard-00000, ... (sorted in
// their order).
func shardNames(n int) []string {
	w := max(len(fmt.Sprint(n-1)), 5)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%0*d", w, i)
	}
	return names
}

// metricValue returns the value of the first sample of metric (a name
// without labels) in a Prometheus text exposition.
func metricValue(r io.Reader, metric string) (float64, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || !strings.HasPrefix(rest, " ") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

// heapMiB reads p's go_memstats_heap_inuse_bytes from its /metrics (0 if it
// has none).
func heapMiB(p *proc) float64 {
	resp, err := http.Get("http://" + argValue(p.args, "--health-addr") + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	v, _ := metricValue(resp.Body, "go_memstats_heap_inuse_bytes")
	return v / (1 << 20)
}

// logCounts counts a node log's lines by message (the msg= of a logfmt or
// the "msg" of a JSON line, else the line's first 80 bytes), most frequent
// first, as "count× message".
func logCounts(log string) []string {
	count := map[string]int{}
	for line := range strings.SplitSeq(log, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		count[logMessage(line)]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := count[b] - count[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d× %s", count[k], k)
	}
	return out
}

// logMessage is the message of one log line (see logCounts).
func logMessage(line string) string {
	if i := strings.Index(line, `"msg":"`); i >= 0 {
		rest := line[i+7:]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			return rest[:j]
		}
	}
	if i := strings.Index(line, "msg="); i >= 0 {
		rest := line[i+4:]
		if strings.HasPrefix(rest, `"`) {
			if j := strings.IndexByte(rest[1:], '"'); j >= 0 {
				return rest[1 : j+1]
			}
		}
		if j := strings.IndexByte(rest, ' '); j >= 0 {
			return rest[:j]
		}
		return rest
	}
	// A standard-library log line (memberlist's): drop the timestamp
	// before its "[LEVEL]", which would make every line its own message.
	if i := strings.Index(line, " ["); i >= 0 {
		line = line[i+1:]
	}
	return line[:min(len(line), 80)]
}

// sendStats reads p's peer message counters: the total sent, and the
// failed sends by type ("sent 100, failed 20: Candidacy 15, Heartbeat 5").
func sendStats(p *proc) string {
	resp, err := http.Get("http://" + argValue(p.args, "--health-addr") + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return summarizeSends(string(b))
}

// summarizeSends is sendStats on a /metrics text: the peer messages sent
// and failed, by type, those this node refused, by reason, and those its
// full inbox lost.
func summarizeSends(text string) string {
	counts := map[string]map[string]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		for _, m := range []string{"electord_messages_sent_total", "electord_messages_send_failed_total",
			"electord_messages_refused_total", "electord_inbox_full_total"} {
			rest, ok := strings.CutPrefix(line, m)
			if !ok {
				continue
			}
			labels, val, ok := strings.Cut(rest, " ")
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(val, 64)
			if err != nil || v == 0 {
				continue
			}
			key := ""
			if m == "electord_messages_refused_total" {
				_, key, _ = strings.Cut(labels, `reason="`)
			} else {
				_, key, _ = strings.Cut(labels, `type="`)
			}
			key, _, _ = strings.Cut(key, `"`)
			if counts[m] == nil {
				counts[m] = map[string]float64{}
			}
			counts[m][key] += v
		}
	}
	part := func(what, m string) string {
		var total float64
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(counts[m])) {
			total += counts[m][k]
			if k != "" {
				parts = append(parts, fmt.Sprintf("%s %.0f", k, counts[m][k]))
			}
		}
		s := fmt.Sprintf("%s %.0f", what, total)
		if len(parts) > 0 {
			s += " (" + strings.Join(parts, ", ") + ")"
		}
		return s
	}
	return strings.Join([]string{part("sent", "electord_messages_sent_total"), part("failed", "electord_messages_send_failed_total"),
		part("refused", "electord_messages_refused_total"), part("inbox full", "electord_inbox_full_total")}, ", ")
}
