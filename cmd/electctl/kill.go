package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newKillCmd(g *globals) *cobra.Command {
	var exit bool
	cmd := &cobra.Command{
		Use:   "kill ID",
		Short: "Make node ID crash-stop as its peers see it (--exit: stop it for good)",
		Long: `Make node ID stop answering its peers and leave gossip, as a crash would;
its process and API stay up, so "electctl revive ID" undoes it. Any endpoint
forwards the command to node ID.

With --exit node ID stops for good instead: it hands leadership over if it
leads, leaves the cluster and closes its ports; electord exits, and in
electord dev that node's daemon stops while the others go on. It cannot be
revived.

electctl then checks, within --timeout, that node ID's api port closes.

Exit codes: 0 done (with --exit: node ID's api port is closed); 3 node ID
could not be reached; 4 node ID is not a member; 6 (--exit) node ID still
answers when --timeout ends.`,
		Args: exactArgs(1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if exit {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return g.killExit(cmd, id)
			}
			return g.onNode(func(c *client.Client, ctx context.Context, id client.NodeID) (client.CommandResult, error) {
				return c.Kill(ctx, id, false)
			})(cmd, args)
		},
	}
	cmd.Flags().BoolVar(&exit, "exit", false, "stop the node for good (its process exits; in electord dev, its daemon stops)")
	return cmd
}

// killExit sends kill --exit to node id, then waits, within --timeout,
// until node id's api address (as the members list gave it) refuses
// connections, and says which happened.
func (g *globals) killExit(cmd *cobra.Command, id client.NodeID) error {
	var (
		res  client.CommandResult
		addr string
		gone bool
	)
	if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		if ms, merr := c.Members(ctx); merr == nil {
			for _, m := range ms {
				if m.ID == id {
					addr = m.APIAddr
				}
			}
		}
		if res, err = c.Kill(ctx, id, true); err != nil || addr == "" {
			return err
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if refused(ctx, addr) {
				gone = true
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case addr == "":
		return g.commandOutput(res.Message+" (its api address is not known here: not checked)", res.Leader)
	case gone:
		return g.commandOutput(fmt.Sprintf("%s; its api at %s is closed now", res.Message, addr), res.Leader)
	}
	if err := g.commandOutput(fmt.Sprintf("%s; but its api at %s still answers after --timeout %v", res.Message, addr, g.timeout), res.Leader); err != nil {
		return err
	}
	return &exitError{ExitDeadline, fmt.Sprintf("node %d still answers at %s after --timeout %v", id, addr, g.timeout)}
}

// refused reports whether addr refuses TCP connections: its process (or
// daemon) is gone. A dial that times out proves nothing either way.
func refused(ctx context.Context, addr string) bool {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	conn.Close()
	return false
}
