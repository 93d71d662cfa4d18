package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/k8s/leaderslice"
	"github.com/electord/electord/node"
)

// serviceAccountNamespace is where a pod finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// k8sStopTimeout bounds how long a stopping node tries to empty the
// EndpointSlice that names it.
const k8sStopTimeout = 5 * time.Second

// k8sTarget is who writes the leader's EndpointSlice, from the config.
type k8sTarget struct {
	rest                        *rest.Config
	namespace, service, pod, ip string
	election                    string // "": the default election
}

// k8sSettings resolves the k8s-* keys and their defaults: the namespace
// from the service account (nsFile), the pod name from the hostname, the
// pod IP from advertise-host, the client from kubeconfig or the pod's
// service account. Each error names the key to set.
func k8sSettings(cfg config.Config, nsFile string) (k8sTarget, error) {
	t := k8sTarget{service: cfg.K8sLeaderService, namespace: cfg.K8sNamespace, pod: cfg.K8sPodName, ip: cfg.K8sPodIP,
		election: cfg.K8sLeaderElection}
	var err error
	if cfg.Kubeconfig != "" {
		if t.rest, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
			return t, fmt.Errorf("kubeconfig: %q: %w", cfg.Kubeconfig, err)
		}
	} else if t.rest, err = rest.InClusterConfig(); err != nil {
		return t, fmt.Errorf("kubeconfig: not set, and no in-cluster service account (%v): set kubeconfig, or run electord in a pod", err)
	}
	if t.namespace == "" {
		b, err := os.ReadFile(nsFile)
		if err != nil {
			return t, fmt.Errorf("k8s-namespace: not set, and the service account's namespace cannot be read (%v): set k8s-namespace", err)
		}
		if t.namespace = strings.TrimSpace(string(b)); t.namespace == "" {
			return t, fmt.Errorf("k8s-namespace: not set, and %s is empty: set k8s-namespace", nsFile)
		}
	}
	if t.pod == "" {
		if t.pod, err = os.Hostname(); err != nil || t.pod == "" {
			return t, fmt.Errorf("k8s-pod-name: not set, and the hostname is unknown (%v): set k8s-pod-name", err)
		}
	}
	if t.ip == "" {
		if t.ip = cfg.AdvertiseHost; t.ip == "" {
			return t, errors.New("k8s-pod-ip: not set, and advertise-host is empty: set k8s-pod-ip to the pod's IP (status.podIP)")
		}
	}
	if net.ParseIP(t.ip) == nil {
		key := "k8s-pod-ip"
		if cfg.K8sPodIP == "" {
			key = "advertise-host (the default of k8s-pod-ip)"
		}
		return t, fmt.Errorf("%s: %q is not an IP address: set k8s-pod-ip to the pod's IP (status.podIP)", key, t.ip)
	}
	return t, nil
}

// k8sRouting is leader-only routing (package k8s/leaderslice),
// resolved from the config before the daemon starts, so that a bad k8s-*
// key or kubeconfig exits 2 before any port is bound or gossip joined; the
// writer starts after the daemon. Its counters are on /metrics
// (Collector).
type k8sRouting struct {
	t      k8sTarget
	client leaderslice.Client
	w      atomic.Pointer[leaderslice.Writer]
}

// prepareK8s resolves leader-only routing when k8s-leader-service is set
// (nil when it is not). Its errors are configuration errors: exit 2.
func prepareK8s(cfg config.Config) (*k8sRouting, error) {
	if cfg.K8sLeaderService == "" {
		return nil, nil
	}
	t, err := k8sSettings(cfg, serviceAccountNamespace)
	if err != nil {
		return nil, configError{err}
	}
	t.rest.UserAgent = "electord/leaderslice"
	client, err := leaderslice.NewClient(t.rest)
	if err != nil {
		return nil, configError{fmt.Errorf("kubeconfig: %w", err)}
	}
	return &k8sRouting{t: t, client: client}, nil
}

// collectors is what the daemon adds to /metrics (none when k is nil).
func (k *k8sRouting) collectors() []prometheus.Collector {
	if k == nil {
		return nil
	}
	return []prometheus.Collector{k}
}

// start starts the writer on d's leadership: the leader writes the
// Service's EndpointSlice with its own pod's address and term. The
// returned func stops it and empties the slice if it holds this pod's
// claim, bounded by k8sStopTimeout.
func (k *k8sRouting) start(d *daemon.Daemon, log *slog.Logger) (func(), error) {
	if k == nil {
		return func() {}, nil
	}
	t := k.t
	cfg := leaderslice.Config{
		Client: k.client, Namespace: t.namespace, Service: t.service, PodName: t.pod, PodIP: t.ip,
		Election: t.election, Logger: log,
	}
	var closeSource func()
	if t.election == "" {
		sub := d.Node.Subscribe()
		cfg.Events, cfg.Current, closeSource = sub.C(), d.Node.Leader, sub.Close
		// Subscribe's first value and Leader hide a leadership announced
		// before its quorum lease: the raw one makes the writer ask again
		// until the lease starts.
		cfg.Announced = func() node.LeaderInfo { return d.Node.Status().Leader }
	} else {
		// A named election: this node leads it while it stands for the
		// leading app (the app in this pod), and has no lease to wait for.
		watch, err := d.Node.WatchElection(context.Background(), t.election)
		if err != nil {
			return nil, configError{fmt.Errorf("k8s-leader-election: %w", err)}
		}
		cfg.Events, closeSource = untilDone(watch.C(), d.Done()), watch.Close
		cfg.Current = func() node.LeaderInfo {
			select {
			case <-d.Done():
				return node.LeaderInfo{Election: t.election} // a stopped node leads nothing
			default:
			}
			li, _ := d.Node.ElectionLeader(t.election)
			return li
		}
	}
	w, err := leaderslice.Start(cfg)
	if err != nil {
		closeSource()
		return nil, configError{err}
	}
	k.w.Store(w)
	log.Info("leader-only routing on", "service", t.namespace+"/"+t.service, "election", t.election, "pod", t.pod, "ip", t.ip, "api_server", t.rest.Host)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), k8sStopTimeout)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			log.Error("leader-only routing: could not empty the EndpointSlice that names this pod; the next leader overwrites it", "err", err)
		}
		closeSource()
	}, nil
}

// untilDone forwards in to the channel it returns, which it closes when
// done closes (the node stopped) or in does: the writer releases the slice
// when its Events close, as it does for the default election, whose
// Subscription the node closes. Only the newest value matters, so a value
// the writer has not read yet is replaced, and the forwarder never blocks.
func untilDone(in <-chan node.LeaderInfo, done <-chan struct{}) <-chan node.LeaderInfo {
	out := make(chan node.LeaderInfo, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-done:
				return
			case li, ok := <-in:
				if !ok {
					return
				}
				select {
				case <-out:
				default:
				}
				out <- li
			}
		}
	}()
	return out
}

var (
	sliceWritesDesc = prometheus.NewDesc("electord_leader_slice_writes_total",
		"Writes of the leader Service's EndpointSlice by this pod, by result: claim (named this pod), release (emptied it), "+
			"conflict (a stale resourceVersion: read again), stale (not claimed: the slice records a higher term), error (other failed API calls, retried).",
		[]string{"result"}, nil)
	sliceNamedDesc = prometheus.NewDesc("electord_leader_slice_named",
		"1 when the leader Service's EndpointSlice named this pod (at its IP) when this pod last read or wrote it, else 0.", nil, nil)
)

// Describe and Collect make k a prometheus.Collector (nothing is exported
// until the writer runs).
func (k *k8sRouting) Describe(ch chan<- *prometheus.Desc) {
	ch <- sliceWritesDesc
	ch <- sliceNamedDesc
}

func (k *k8sRouting) Collect(ch chan<- prometheus.Metric) {
	w := k.w.Load()
	if w == nil {
		return
	}
	s := w.Snapshot()
	for _, c := range []struct {
		result string
		n      uint64
	}{{"claim", s.Claims}, {"release", s.Releases}, {"conflict", s.Conflicts}, {"stale", s.Stale}, {"error", s.Errors}} {
		ch <- prometheus.MustNewConstMetric(sliceWritesDesc, prometheus.CounterValue, float64(c.n), c.result)
	}
	named := 0.0
	if s.Named {
		named = 1
	}
	ch <- prometheus.MustNewConstMetric(sliceNamedDesc, prometheus.GaugeValue, named)
}
