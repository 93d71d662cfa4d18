package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/k8s/leaderslice"
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
}

// k8sSettings resolves the k8s-* keys and their defaults: the namespace
// from the service account (nsFile), the pod name from the hostname, the
// pod IP from advertise-host, the client from kubeconfig or the pod's
// service account. Each error names the key to set.
func k8sSettings(cfg config.Config, nsFile string) (k8sTarget, error) {
	t := k8sTarget{service: cfg.K8sLeaderService, namespace: cfg.K8sNamespace, pod: cfg.K8sPodName, ip: cfg.K8sPodIP}
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

// startK8s starts leader-only routing (issue 13, package k8s/leaderslice)
// when k8s-leader-service is set: the leader writes that Service's
// EndpointSlice with its own pod's address and term. The returned func
// stops it and empties the slice if it still names this pod, bounded by
// k8sStopTimeout.
func startK8s(cfg config.Config, d *daemon.Daemon, log *slog.Logger) (func(), error) {
	if cfg.K8sLeaderService == "" {
		return func() {}, nil
	}
	t, err := k8sSettings(cfg, serviceAccountNamespace)
	if err != nil {
		return nil, err
	}
	t.rest.UserAgent = "electord/leaderslice"
	client, err := kubernetes.NewForConfig(t.rest)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	sub := d.Node.Subscribe()
	w, err := leaderslice.Start(leaderslice.Config{
		Client: client, Namespace: t.namespace, Service: t.service, PodName: t.pod, PodIP: t.ip,
		Events: sub.C(), Current: d.Node.Leader, Logger: log,
	})
	if err != nil {
		sub.Close()
		return nil, err
	}
	log.Info("leader-only routing on", "service", t.namespace+"/"+t.service, "pod", t.pod, "ip", t.ip, "api_server", t.rest.Host)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), k8sStopTimeout)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			log.Error("leader-only routing: could not empty the EndpointSlice; the next leader overwrites it", "err", err)
		}
		sub.Close()
	}, nil
}
