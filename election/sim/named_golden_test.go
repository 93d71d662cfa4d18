package sim

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/electiontest"
)

// TestNamedTranscripts replays testdata/named/*.txt: candidacy scenarios on
// a small cluster, with every leadership change and every message but
// heartbeats printed as it happens; -rewrite regenerates them (review the
// diff). Commands:
//
//	new nodes=3 algo=bully [preempt] [seed=1]
//	stand node=1 e=jobs app=a [prio=0] [value=...]
//	withdraw app=a
//	run TICKS
//	agree e=jobs [max=TICKS]   run until every node shows one live leader
//	status e=jobs
//	crash node=2 / restart node=2
func TestNamedTranscripts(t *testing.T) {
	electiontest.RunScripts(t, "testdata/named", func() electiontest.Script { return &namedScript{} })
}

type namedScript struct {
	ns    *Named
	apps  map[string]appID
	names map[appID]string
	seen  int    // Leaderships printed
	new   string // the app standing now, before its id is known
	out   strings.Builder
}

func (d *namedScript) Do(cmd string) string {
	d.out.Reset()
	if err := d.exec(cmd); err != nil {
		fmt.Fprintf(&d.out, "error: %v\n", err)
	}
	if d.out.Len() == 0 {
		d.out.WriteString("ok\n")
	}
	return d.out.String()
}

func (d *namedScript) exec(cmd string) error {
	verb, args, pos := electiontest.Fields(cmd)
	if verb != "new" && d.ns == nil {
		return fmt.Errorf("no cluster: start with new")
	}
	node := func() (election.NodeID, error) {
		v, err := strconv.ParseUint(args["node"], 10, 64)
		return election.NodeID(v), err
	}
	switch verb {
	case "new":
		return d.newCluster(args, pos)
	case "stand":
		id, err := node()
		if err != nil {
			return err
		}
		prio, _ := strconv.ParseInt(args["prio"], 10, 64)
		d.new = args["app"]
		c, err := d.ns.Stand(id, args["e"], args["value"], prio)
		d.changes()
		d.new = ""
		if err != nil {
			return err
		}
		app := appID{id, c}
		d.apps[args["app"]], d.names[app] = app, args["app"]
		fmt.Fprintf(&d.out, "app %s stands through node %d, queued at %d\n", args["app"], id, len(d.ns.Queue(id, args["e"]))-1)
	case "withdraw":
		app, ok := d.apps[args["app"]]
		if !ok {
			return fmt.Errorf("no app %q", args["app"])
		}
		if err := d.ns.Withdraw(app.node, app.id); err != nil {
			return err
		}
	case "run":
		n, err := strconv.Atoi(pos[0])
		if err != nil {
			return err
		}
		return d.ns.Run(n)
	case "agree":
		max := 400
		if v, ok := args["max"]; ok {
			var err error
			if max, err = strconv.Atoi(v); err != nil {
				return err
			}
		}
		start := d.ns.Now()
		ok, err := d.ns.RunUntil(max, func() bool { _, _, ok := d.ns.AgreedNamed(args["e"]); return ok })
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no agreement in %d ticks: %s", max, d.ns.DescribeNamed(args["e"]))
		}
		l, term, _ := d.ns.AgreedNamed(args["e"])
		fmt.Fprintf(&d.out, "agreed after %d ticks: leader %d term %v\n", d.ns.Now()-start, l, term)
	case "status":
		fmt.Fprintf(&d.out, "%s\n", strings.TrimSpace(d.ns.DescribeNamed(args["e"])))
	case "crash":
		id, err := node()
		if err != nil {
			return err
		}
		d.ns.Crash(id)
	case "restart":
		id, err := node()
		if err != nil {
			return err
		}
		return d.ns.Restart(id)
	default:
		return fmt.Errorf("unknown command %q", verb)
	}
	return nil
}

func (d *namedScript) newCluster(args map[string]string, pos []string) error {
	opts := Options{N: 3, Algorithm: "bully", Seed: 1}
	var err error
	for k, v := range args {
		switch k {
		case "nodes":
			opts.N, err = strconv.Atoi(v)
		case "algo":
			opts.Algorithm = v
		case "seed":
			opts.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return fmt.Errorf("new: unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, p := range pos {
		if p != "preempt" {
			return fmt.Errorf("new: unknown flag %q", p)
		}
		opts.Preempt = true
	}
	if d.ns, err = NewNamed(opts); err != nil {
		return err
	}
	d.apps, d.names, d.seen = map[string]appID{}, map[appID]string{}, 0
	// What happens is printed as it happens: messages as they are sent,
	// and the leadership changes of the step before them.
	d.ns.Hook = func(m election.Message) bool {
		d.changes()
		if m.Type != election.MsgHeartbeat && m.Type != election.MsgHeartbeatResp {
			fmt.Fprintf(&d.out, "@%d %s e=%s\n", d.ns.Now(), electiontest.Format(m), m.Election)
		}
		return true
	}
	d.ns.after = func() error { d.changes(); return d.ns.checkNamed() }
	return nil
}

// changes prints the leadership changes not printed yet.
func (d *namedScript) changes() {
	for ; d.seen < len(d.ns.Leaderships); d.seen++ {
		c := d.ns.Leaderships[d.seen]
		app, ok := d.names[appID{c.Node, c.App}]
		if !ok {
			app = d.new
		}
		fmt.Fprintf(&d.out, "@%d node %d %s: %v leader=%d term=%v (app %s)\n",
			c.Tick, c.Node, c.Election, c.Role, c.Leader, c.Term, app)
	}
}
