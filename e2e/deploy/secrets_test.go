package deploy

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"

	"github.com/electord/electord/security"
)

// secrets makes the Secrets the overlay's volumes name, as the README
// says to make them (electord certs: a CA, a node certificate per pod,
// a gossip key), lays each volume out on the host as the kubelet would
// (the Secret's keys at the volume's paths, root:fsGroup, the volume's
// mode), and mounts it read-only where the electord container mounts it.
// Without TLS flags it only sets plain credentials for the test's watch.
func (s *sim) secrets() {
	cluster := flagValue(s.args, "cluster")
	if flagValue(s.args, "tls-ca") == "" {
		s.creds, s.adminCreds = insecure.NewCredentials(), insecure.NewCredentials()
		return
	}
	dir := s.t.TempDir()
	ca, err := security.CreateCA(dir, cluster, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(name)
		if err != nil {
			s.t.Fatal(err)
		}
		return b
	}
	secrets := map[string]map[string][]byte{}
	for i := range replicas {
		crt, key, err := ca.IssueNode(dir, uint64(i+1), []string{"127.0.0.1", "localhost"}, time.Hour)
		if err != nil {
			s.t.Fatal(err)
		}
		secrets[fmt.Sprintf("%s-%d-tls", s.tmpl.sts.Name, i)] = map[string][]byte{
			"tls.crt": read(crt), "tls.key": read(key), "ca.crt": read(filepath.Join(dir, security.CACertFile)),
		}
	}
	k := make([]byte, 32)
	rand.Read(k)
	secrets["electord-gossip-key"] = map[string][]byte{"gossip.key": []byte(base64.StdEncoding.EncodeToString(k) + "\n")}

	gid := int(*s.tmpl.spec.SecurityContext.FSGroup)
	for _, v := range s.tmpl.spec.Volumes {
		if serviceAccountVolume(v) {
			continue // there is no API server here (the --k8s-* flags are left out)
		}
		var sources []*corev1.SecretProjection
		mode := int32(0o644)
		switch {
		case v.Secret != nil:
			sources = []*corev1.SecretProjection{{LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items}}
			if v.Secret.DefaultMode != nil {
				mode = *v.Secret.DefaultMode
			}
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					s.t.Fatalf("volume %s: only Secret sources are simulated", v.Name)
				}
				sources = append(sources, src.Secret)
			}
			if v.Projected.DefaultMode != nil {
				mode = *v.Projected.DefaultMode
			}
		default:
			s.t.Fatalf("volume %s: only Secret volumes are simulated", v.Name)
		}
		root := filepath.Join(dir, "volume-"+v.Name)
		for _, src := range sources {
			data, ok := secrets[src.Name]
			if !ok {
				s.t.Fatalf("volume %s names Secret %s, which the README does not say to make", v.Name, src.Name)
			}
			items := src.Items
			if len(items) == 0 {
				for key := range data {
					items = append(items, corev1.KeyToPath{Key: key, Path: key})
				}
			}
			for _, it := range items {
				b, ok := data[it.Key]
				if !ok {
					s.t.Fatalf("volume %s: Secret %s has no key %s", v.Name, src.Name, it.Key)
				}
				file := filepath.Join(root, it.Path)
				m := mode
				if it.Mode != nil {
					m = *it.Mode
				}
				for d := filepath.Dir(file); len(d) >= len(root); d = filepath.Dir(d) {
					os.MkdirAll(d, 0o755)
					os.Chown(d, 0, gid)
				}
				if err := os.WriteFile(file, b, 0o600); err != nil {
					s.t.Fatal(err)
				}
				os.Chown(file, 0, gid)
				os.Chmod(file, os.FileMode(m))
			}
		}
		mounted := false
		for _, vm := range s.tmpl.electord.VolumeMounts {
			if vm.Name == v.Name {
				s.mounts = append(s.mounts, "-v", root+":"+vm.MountPath+":ro")
				mounted = true
			}
		}
		if !mounted {
			s.t.Fatalf("volume %s is mounted nowhere in electord", v.Name)
		}
	}

	// The test's watch is a client of the cluster's API.
	crt, key, err := ca.IssueClient(dir, "e2e-deploy", false, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		s.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(read(filepath.Join(dir, security.CACertFile)))
	s.creds = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13})
	// And an operator's (admin role), for electctl resign through a follower.
	crt, key, err = ca.IssueClient(dir, "e2e-deploy-admin", true, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	if pair, err = tls.LoadX509KeyPair(crt, key); err != nil {
		s.t.Fatal(err)
	}
	s.adminCreds = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13})
	s.t.Logf("secure overlay: cluster %s, %d Secret volumes mounted read-only as %s", cluster, len(s.mounts)/2, strconv.Itoa(gid))
}

// serviceAccountVolume: v is the projected service-account token volume.
func serviceAccountVolume(v corev1.Volume) bool {
	return v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil })
}
