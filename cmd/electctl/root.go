package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

// DefaultEndpoint is electord's default api-addr (config: api-addr).
const DefaultEndpoint = "127.0.0.1:7070"

// maxDialTimeout bounds the wait for one endpoint, so that a hung first
// endpoint leaves time for the next within --timeout.
const maxDialTimeout = 2 * time.Second

// globals are the persistent flags and the output streams.
type globals struct {
	endpoints []string
	timeout   time.Duration
	output    string
	cacert    string
	cert      string
	key       string
	stdout    io.Writer
	stderr    io.Writer
}

// run executes electctl with args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code, msg := classify(err)
	if code == ExitUnavailable && g.cacert == "" && strings.Contains(msg, "EOF") {
		msg += " (does the endpoint serve TLS? give --cacert, --cert and --key)"
	}
	fmt.Fprintf(stderr, "electctl: %s\n", oneLine(msg))
	if code == ExitUsage {
		fmt.Fprintln(stderr, "Run 'electctl --help' for usage.")
	}
	return code
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "electctl",
		Short: "Query and drive an electord cluster",
		Long: `electctl talks to electord nodes through their Elector API (gRPC).

Each call goes to the first of --endpoints that answers; any node can
answer, and commands are forwarded to the node they concern (kill, revive)
or to the leader (resign, transfer).

` + exitCodeHelp(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.validate()
		},
	}
	pf := root.PersistentFlags()
	pf.StringSliceVar(&g.endpoints, "endpoints", []string{DefaultEndpoint}, "comma-separated api addresses (host:port), tried in order")
	pf.DurationVar(&g.timeout, "timeout", 5*time.Second, "deadline of each call (watch runs until Ctrl-C or --count)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.StringVar(&g.cacert, "cacert", os.Getenv("ELECTCTL_CACERT"), "cluster CA certificate (PEM): connect over TLS and check the nodes against it [$ELECTCTL_CACERT]")
	pf.StringVar(&g.cert, "cert", os.Getenv("ELECTCTL_CERT"), "client certificate (PEM, electord certs client; --admin for kill, revive, resign, transfer) [$ELECTCTL_CERT]")
	pf.StringVar(&g.key, "key", os.Getenv("ELECTCTL_KEY"), "key of --cert (PEM) [$ELECTCTL_KEY]")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	root.AddCommand(newStatusCmd(g), newLeaderCmd(g), newWatchCmd(g), newMembersCmd(g),
		newKillCmd(g), newReviveCmd(g), newResignCmd(g), newTransferCmd(g))
	return root
}

func (g *globals) validate() error {
	switch g.output {
	case "table", "json":
	default:
		return usagef("-o %s: want table or json", g.output)
	}
	if g.timeout <= 0 {
		return usagef("--timeout %v: must be positive", g.timeout)
	}
	var eps []string
	for _, e := range g.endpoints {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return usagef("--endpoints: at least one address is needed")
	}
	if (g.cert == "") != (g.key == "") {
		return usagef("--cert and --key go together")
	}
	if g.cert != "" && g.cacert == "" {
		return usagef("--cert needs --cacert (the cluster CA that signed the nodes)")
	}
	g.endpoints = eps
	return nil
}

func (g *globals) json() bool { return g.output == "json" }

// client opens a client of the endpoints.
func (g *globals) client() (*client.Client, error) {
	opts := []client.Option{client.WithDialTimeout(min(g.timeout, maxDialTimeout))}
	if g.cacert != "" {
		opts = append(opts, client.WithTLSFiles(g.cacert, g.cert, g.key))
	}
	c, err := client.NewWithOptions(g.endpoints, opts...)
	if err != nil {
		if g.cacert != "" {
			return nil, usagef("--cacert/--cert/--key: %v", err)
		}
		return nil, usagef("--endpoints: %v", err)
	}
	return c, nil
}

// call runs f with a client and a context bounded by --timeout.
func (g *globals) call(cmd *cobra.Command, f func(context.Context, *client.Client) error) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	if err := f(ctx, c); err != nil {
		return &runError{err}
	}
	return nil
}

// command runs one command (kill, revive, resign, transfer) through a
// client and prints its result.
func (g *globals) command(cmd *cobra.Command, f func(*client.Client, context.Context) (client.CommandResult, error)) error {
	var res client.CommandResult
	if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		res, err = f(c, ctx)
		return err
	}); err != nil {
		return err
	}
	return g.commandOutput(res)
}

// onNode is the RunE of a command about node ID, its one argument (kill,
// revive, transfer).
func (g *globals) onNode(f func(*client.Client, context.Context, client.NodeID) (client.CommandResult, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := parseID(args[0])
		if err != nil {
			return err
		}
		return g.command(cmd, func(c *client.Client, ctx context.Context) (client.CommandResult, error) {
			return f(c, ctx, id)
		})
	}
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			if n == 0 {
				return usagef("unexpected argument %q", args[0])
			}
			return usagef("want %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}

func parseID(s string) (client.NodeID, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usagef("node id %q: want a positive integer", s)
	}
	return client.NodeID(id), nil
}
