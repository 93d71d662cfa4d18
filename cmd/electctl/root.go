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
	"github.com/spf13/pflag"

	"github.com/electord/electord/client"
	"github.com/electord/electord/config"
	"github.com/electord/electord/internal/version"
)

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

Every flag can also be set with an ELECTCTL_<FLAG> environment variable
(dashes become underscores: ELECTCTL_ENDPOINTS=10.0.0.11:7070,10.0.0.12:7070);
a flag on the command line wins.

Terms are written two ways, each labelled: for people epoch.slot ("term
21.5": the election epoch and the leader's slot), for programs the integer
fencing token ("fencing token 1376261"); -o json carries both ("term" is the
token, "term_epoch_slot" the other).

` + exitCodeHelp(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			return g.validate()
		},
	}
	pf := root.PersistentFlags()
	pf.StringSliceVar(&g.endpoints, "endpoints", []string{config.Default().APIAddr}, "comma-separated api addresses (host:port), tried in order")
	pf.DurationVar(&g.timeout, "timeout", 5*time.Second, "deadline of each call (watch runs until Ctrl-C or --count)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.StringVar(&g.cacert, "cacert", "", "cluster CA certificate (PEM): connect over TLS and check the nodes against it")
	pf.StringVar(&g.cert, "cert", "", "client certificate (PEM, electord certs client; --admin for kill, revive, resign, transfer)")
	pf.StringVar(&g.key, "key", "", "key of --cert (PEM)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	root.AddCommand(newStatusCmd(g), newLeaderCmd(g), newWatchCmd(g), newMembersCmd(g),
		newKillCmd(g), newReviveCmd(g), newResignCmd(g), newTransferCmd(g), newVersionCmd(),
		newElectCmd(g), newElectionsCmd(g), newProclaimCmd(g))
	root.Version = version.Read().String("electctl")
	root.SetVersionTemplate("{{.Version}}\n")
	annotateEnv(root)
	return root
}

// envName is the environment variable of a flag: ELECTCTL_ENDPOINTS.
func envName(flag string) string {
	return "ELECTCTL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envSkip are flags with no environment variable.
func envSkip(name string) bool { return name == "help" || name == "version" }

// applyEnv sets every flag of cmd (its own and the inherited ones) that
// the command line did not set from its ELECTCTL_<FLAG> variable.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || envSkip(f.Name) {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			err = usagef("%s=%s: %v", envName(f.Name), v, serr)
		}
	})
	return err
}

// annotateEnv adds "[$ELECTCTL_<FLAG>]" to the help of every flag.
func annotateEnv(root *cobra.Command) {
	done := map[*pflag.Flag]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.LocalNonPersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !done[f] && !envSkip(f.Name) {
					done[f] = true
					f.Usage += " [$" + envName(f.Name) + "]"
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version and VCS revision (also: electctl --version)",
		Args:  exactArgs(0, ""),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.Read().String("electctl"))
		},
	}
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

// namedCommand runs a command of a named election (resign, transfer,
// proclaim) and prints the node's answer. Its LeaderInfo, the default
// election's, is not printed: it says nothing of the named one.
func (g *globals) namedCommand(cmd *cobra.Command, f func(context.Context, *client.Client) (client.CommandResult, error)) error {
	var res client.CommandResult
	if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		res, err = f(ctx, c)
		return err
	}); err != nil {
		return err
	}
	_, err := fmt.Fprintln(g.stdout, res.Message)
	return err
}

// command runs kill or revive through a client and prints its result.
func (g *globals) command(cmd *cobra.Command, f func(*client.Client, context.Context) (client.CommandResult, error)) error {
	var res client.CommandResult
	if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		res, err = f(c, ctx)
		return err
	}); err != nil {
		return err
	}
	return g.commandOutput(res.Message, res.Leader)
}

// handover runs resign (to 0) or transfer to node to, then waits, within
// --timeout, until the first answering endpoint sees the leadership that
// follows, and says who leads now: exit 0 when a new leader (for transfer:
// node to) leads, 5 when another node took over (the transfer did not
// hold), 6 when no new leader was seen in time.
func (g *globals) handover(cmd *cobra.Command, to client.NodeID, f func(*client.Client, context.Context) (client.CommandResult, error)) error {
	var (
		res     client.CommandResult
		now     client.LeaderInfo
		prev    client.LeaderInfo // who led before the command
		ep      string
		saw, at bool // a new leader seen; node to led already
	)
	if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		before, _ := c.Leader(ctx) // what "new" means; a failure shows in f
		prev = before
		if res, err = f(c, ctx); err != nil {
			return err
		}
		if to != 0 && before.HasLeader() && before.ID == to {
			now, saw, at = before, true, true
			return nil
		}
		for ev := range c.Watch(ctx) {
			if ev.Err != nil {
				continue
			}
			now, ep = ev.Leader, ev.Endpoint
			if now.HasLeader() && now.Term > before.Term {
				saw = true
				break
			}
		}
		return nil
	}); err != nil {
		return err
	}
	msg := res.Message
	switch {
	case !saw:
		msg += fmt.Sprintf("; no new leader known within --timeout %v (node %s is %s)", g.timeout, dash(ep), dash(now.State))
		if err := g.commandOutput(msg, res.Leader); err != nil {
			return err
		}
		return &exitError{ExitDeadline, "no new leader within --timeout " + g.timeout.String()}
	case to == 0 && prev.HasLeader() && now.ID == prev.ID:
		// The resigned leader leads again (no other node could take over
		// in time): the resignation did not hold.
		msg += fmt.Sprintf(", but node %d leads again, %s: the resignation did not hold", now.ID, termText(now.Term))
		if err := g.commandOutput(msg, now); err != nil {
			return err
		}
		return &exitError{ExitFailedPrecondition, fmt.Sprintf("node %d leads again", now.ID)}
	case to != 0 && now.ID != to:
		msg += fmt.Sprintf(", but node %d leads now, %s: the transfer did not hold", now.ID, termText(now.Term))
		if err := g.commandOutput(msg, now); err != nil {
			return err
		}
		return &exitError{ExitFailedPrecondition, fmt.Sprintf("node %d did not keep the leadership: node %d took it", to, now.ID)}
	}
	if at {
		return g.commandOutput(msg+", "+termText(now.Term), now)
	}
	return g.commandOutput(msg+fmt.Sprintf("; node %d leads now, %s", now.ID, termText(now.Term)), now)
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
