package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electord/electord/config"
)

func TestK8sSettingsDefaultsAndErrors(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	nsFile := filepath.Join(dir, "namespace")
	if err := os.WriteFile(nsFile, []byte("apps\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := config.Config{K8sLeaderService: "my-app-leader", Kubeconfig: kc, AdvertiseHost: "10.1.2.3"}

	got, err := k8sSettings(base, nsFile)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if got.namespace != "apps" || got.pod != host || got.ip != "10.1.2.3" || got.rest.Host != "https://10.0.0.1:6443" || got.rest.BearerToken != "t" {
		t.Errorf("defaults: %+v", got)
	}

	for want, edit := range map[string]func(*config.Config, *string){
		"kubeconfig: ":                   func(c *config.Config, _ *string) { c.Kubeconfig = filepath.Join(dir, "missing") },
		"kubeconfig: not set":            func(c *config.Config, _ *string) { c.Kubeconfig = "" },
		"k8s-namespace: not set":         func(_ *config.Config, f *string) { *f = filepath.Join(dir, "missing") },
		"k8s-pod-ip: not set":            func(c *config.Config, _ *string) { c.AdvertiseHost = "" },
		`k8s-pod-ip: "pod-0" is not`:     func(c *config.Config, _ *string) { c.K8sPodIP = "pod-0" },
		`advertise-host (the default of`: func(c *config.Config, _ *string) { c.AdvertiseHost = "node-1.example" },
	} {
		c, f := base, nsFile
		edit(&c, &f)
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		if _, err := k8sSettings(c, f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	set := base
	set.K8sNamespace, set.K8sPodName, set.K8sPodIP = "ns2", "web-0", "fd00::7"
	if got, err := k8sSettings(set, filepath.Join(dir, "missing")); err != nil || got.namespace != "ns2" || got.pod != "web-0" || got.ip != "fd00::7" {
		t.Errorf("explicit keys: %+v %v", got, err)
	}
}
