package metrics

import "github.com/prometheus/client_golang/prometheus"

// The named elections' metrics are counts over all of them, with no label
// per election: a node may know thousands of elections, and a series per
// name would grow the scrape and Prometheus's index with every name ever
// used. Which election has which leader is on the status page
// (/status/elections), not in the metrics.
//
// Leaderships per node are each node's own gauge (named_elections_led),
// not a gauge labelled by node id on every node: that would be bounded by
// the cluster's size, but every node would export every node's count as it
// sees it (n² series, mostly the same numbers), and the balance across nodes
// is one query over the nodes' own gauges (docs/OPERATIONS.md).
var (
	namedElectionsDesc = desc("named_elections", "Named elections this node knows: it stands in them, watches them, or a peer stands in them.")
	namedLedDesc       = desc("named_elections_led", "Named elections this node leads (it stands for the app that leads).")
	namedStandingDesc  = desc("named_elections_standing", "Named elections this node stands in (an app campaigning through it heads its queue there).")
	namedNoLeaderDesc  = desc("named_elections_leaderless", "Named elections this node knows with no leader known to it.")
	namedCandDesc      = desc("named_candidacies", "Apps campaigning in named elections through this node, queued ones included.")
	namedChangesDesc   = desc("named_leader_changes_total", "Changes of a named election's leadership as this node shows it (a new leader, a new token, or no leader any more), all elections together.")
)

// collectNamed sends the named elections' counts (one pass over them).
func (c *collector) collectNamed(ch chan<- prometheus.Metric) {
	nc := c.s.Node.NamedCounts()
	ch <- gauge(namedElectionsDesc, float64(nc.Elections))
	ch <- gauge(namedLedDesc, float64(nc.Led))
	ch <- gauge(namedStandingDesc, float64(nc.Standing))
	ch <- gauge(namedNoLeaderDesc, float64(nc.Leaderless))
	ch <- gauge(namedCandDesc, float64(nc.Candidacies))
	ch <- counter(namedChangesDesc, nc.LeaderChanges)
}
