package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/electord/electord/config"
	"github.com/electord/electord/security"
)

// GossipKeyFile is the name `electord certs gossip-key` writes in --dir.
const GossipKeyFile = "gossip.key"

func newCertsCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a cluster CA, node and client certificates, and a gossip key",
		Long: `certs creates what a secure cluster needs (docs/SECURITY.md), in --dir:

  electord certs ca         --dir D --cluster prod           # ca.crt, ca.key (keep ca.key offline)
  electord certs node       --dir D --id 3 --host 10.0.0.13,node-3.example
                                                              # node-3.crt, node-3.key
  electord certs client     --dir D --name alice [--admin]   # client-alice.crt, client-alice.key
  electord certs gossip-key --dir D                          # gossip.key

A node runs with --tls-ca D/ca.crt --tls-cert D/node-3.crt --tls-key D/node-3.key
--gossip-key-file D/gossip.key; electctl with --cacert D/ca.crt --cert
D/client-alice.crt --key D/client-alice.key. Certificates are ECDSA P-256;
their identity is a URI SAN, spiffe://<cluster>/node/<id>, /client/<name> or
/admin/<name>. Running a command again replaces the certificate and key
(atomically): nodes and clients pick the new files up without a restart.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "certs", "directory of the CA and the files created")
	lifetime := cmd.PersistentFlags().Duration("lifetime", 0, "validity (default 10 years for the CA, 1 year for others)")
	lifetimeOr := func(d time.Duration) time.Duration { // --lifetime, or d when it is not set
		if *lifetime > 0 {
			return *lifetime
		}
		return d
	}

	var cluster string
	ca := &cobra.Command{
		Use: "ca", Short: "Create the cluster CA (ca.crt, ca.key)", Args: cobra.NoArgs, SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := security.CreateCA(dir, cluster, lifetimeOr(config.DefaultCALifetime))
			if err != nil {
				return configError{err}
			}
			printFiles(cmd.OutOrStdout(), "CA of cluster "+c.Cluster, filepath.Join(dir, security.CACertFile), filepath.Join(dir, security.CAKeyFile))
			return nil
		},
	}
	ca.Flags().StringVar(&cluster, "cluster", "", "cluster name, in every identity (required)")
	_ = ca.MarkFlagRequired("cluster")

	var id uint64
	var hosts []string
	nodeCmd := &cobra.Command{
		Use: "node", Short: "Create a node's certificate (server and client usage)", Args: cobra.NoArgs, SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := security.LoadCA(dir)
			if err != nil {
				return configError{err}
			}
			if len(hosts) == 0 {
				return configError{fmt.Errorf("--host: the node's IP addresses and DNS names are required (what electctl and peers dial)")}
			}
			crt, key, err := c.IssueNode(dir, id, hosts, lifetimeOr(config.DefaultLeafLifetime))
			if err != nil {
				return configError{err}
			}
			printFiles(cmd.OutOrStdout(), security.NodeIdentity(c.Cluster, id).String()+" ("+strings.Join(hosts, ", ")+")", crt, key)
			return nil
		},
	}
	nodeCmd.Flags().Uint64Var(&id, "id", 0, "node id (required)")
	nodeCmd.Flags().StringSliceVar(&hosts, "host", nil, "IP addresses and DNS names of the node, comma-separated (required)")
	_ = nodeCmd.MarkFlagRequired("id")

	var name string
	var admin bool
	clientCmd := &cobra.Command{
		Use: "client", Short: "Create a client certificate (--admin: may kill, revive, resign, transfer)", Args: cobra.NoArgs, SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := security.LoadCA(dir)
			if err != nil {
				return configError{err}
			}
			crt, key, err := c.IssueClient(dir, name, admin, lifetimeOr(config.DefaultLeafLifetime))
			if err != nil {
				return configError{err}
			}
			role := security.RoleClient
			if admin {
				role = security.RoleAdmin
			}
			printFiles(cmd.OutOrStdout(), security.Identity{Cluster: c.Cluster, Role: role, Name: name}.String(), crt, key)
			return nil
		},
	}
	clientCmd.Flags().StringVar(&name, "name", "", "client name (required)")
	clientCmd.Flags().BoolVar(&admin, "admin", false, "the admin role: kill, revive, resign and transfer")
	_ = clientCmd.MarkFlagRequired("name")

	gossipCmd := &cobra.Command{
		Use: "gossip-key", Short: "Create a gossip encryption key file (gossip.key)", Args: cobra.NoArgs, SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := writeGossipKey(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "gossip key: %s (rotate: add a key as a new line, move it first, remove the old one)\n", p)
			return nil
		},
	}
	cmd.AddCommand(ca, nodeCmd, clientCmd, gossipCmd)
	return cmd
}

// writeGossipKey writes a new 32-byte key to dir/gossip.key; an existing
// file is kept.
func writeGossipKey(dir string) (string, error) {
	p := filepath.Join(dir, GossipKeyFile)
	if _, err := os.Stat(p); err == nil {
		return "", configError{fmt.Errorf("%s exists: to rotate, add a key to it as a new line (docs/SECURITY.md)", p)}
	}
	k := make([]byte, 32)
	rand.Read(k)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600)
}

func printFiles(w io.Writer, what, crt, key string) {
	fmt.Fprintf(w, "%s\n  certificate: %s\n  key:         %s\n", what, crt, key)
}
