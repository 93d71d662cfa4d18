package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election/algorithms"
	"github.com/electord/electord/security"
)

func newDevCmd() *cobra.Command {
	var opts devcluster.Options
	var withTLS bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of N real nodes in this process",
		Long: `dev runs N electord nodes on 127.0.0.1 in one process. They talk real gRPC and
real gossip. It prints each node's addresses and status page, every leader
change as it happens, when the live nodes agree, and when two of them name
different leaders for longer than a normal change takes (a disagreement)
and when they recover. Try, in a second terminal:

  electctl --endpoints <an api address> status
  electctl --endpoints <an api address> kill <leader id>

"electctl kill N --exit" stops node N's daemon for good (its ports close);
the process and the other nodes go on.

With --tls every node gets a certificate (a CA, node and admin certificates
and a gossip key are created in a temporary directory) and the electctl
flags to use are printed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Nodes < 1 || opts.Nodes > 256 {
				return configError{fmt.Errorf("nodes: must be between 1 and 256, got %d", opts.Nodes)}
			}
			out := cmd.OutOrStdout()
			opts.Out = out
			var flags string
			if withTLS {
				dir, err := os.MkdirTemp("", "electord-dev-certs-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if flags, err = devTLS(dir, &opts); err != nil {
					return err
				}
			}
			c, err := devcluster.Start(opts)
			if err != nil {
				return err
			}
			defer c.Stop()
			if withTLS {
				fmt.Fprintf(out, "TLS on the API, gossip encrypted; use: electctl --endpoints %s %s status\n", c.Nodes[0].APIAddr, flags)
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
			<-sigs
			fmt.Fprintln(out, "stopping the cluster")
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Nodes, "nodes", 5, "how many nodes")
	f.StringVar(&opts.Algorithm, "algorithm", config.Default().Algorithm, strings.Join(algorithms.Names(), " or "))
	f.IntVar(&opts.Quorum, "quorum", 0, "quorum mode with this cluster size (0 = off)")
	f.BoolVar(&opts.Preempt, "preempt", false, "let a higher-ranked node depose a healthy leader")
	f.IntVar(&opts.BasePort, "base-port", 7070, "node i gets api port base+10(i-1), peer +1, gossip +2, http +3, health and status page +4 (0: any free ports)")
	f.StringVar(&opts.DataDir, "data-dir", "", "where each node persists its term (default: a temporary directory)")
	f.StringVar(&opts.LogLevel, "log-level", "warn", "node log level")
	f.BoolVar(&withTLS, "tls", false, "run with certificates and a gossip key created in a temporary directory (prints the electctl flags)")
	return cmd
}

// DevCluster is the cluster name of electord dev --tls.
const DevCluster = "dev"

// devTLS creates a CA, a certificate per node, an admin client
// certificate and a gossip key in dir, sets the nodes' config to use them,
// and returns the electctl flags.
func devTLS(dir string, opts *devcluster.Options) (string, error) {
	ca, err := security.CreateCA(dir, DevCluster, config.DefaultCALifetime)
	if err != nil {
		return "", err
	}
	for i := 1; i <= opts.Nodes; i++ {
		if _, _, err := ca.IssueNode(dir, uint64(i), []string{"127.0.0.1", "localhost"}, config.DefaultLeafLifetime); err != nil {
			return "", err
		}
	}
	crt, key, err := ca.IssueClient(dir, "admin", true, config.DefaultLeafLifetime)
	if err != nil {
		return "", err
	}
	gossipKey, err := writeGossipKey(dir)
	if err != nil {
		return "", err
	}
	tune := opts.Tune
	opts.Tune = func(c *config.Config) {
		c.Cluster, c.TLSCA, c.GossipKeyFile = DevCluster, filepath.Join(dir, security.CACertFile), gossipKey
		c.TLSCert, c.TLSKey = security.NodeFiles(dir, c.ID)
		if tune != nil {
			tune(c)
		}
	}
	return fmt.Sprintf("--cacert %s --cert %s --key %s", filepath.Join(dir, security.CACertFile), crt, key), nil
}
