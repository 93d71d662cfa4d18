// Package electiontest runs golden transcripts against one election state
// machine: a script of inputs (ticks, peer messages, membership events,
// operator commands) and, after each, the Ready batches the machine produced
// (terms to persist, leadership changes, messages to send). It pins the
// behaviour of an algorithm message by message, in the spirit of etcd-io/raft's
// data-driven tests.
//
// A transcript file holds blocks separated by blank lines:
//
//	# a comment
//	step Coordinator from=5 term=1.5 leader=5 confirmed
//	----
//	persist 1.5
//	change follower leader=5 term=1.5
//
// Run the tests with -rewrite to write the outputs the code produces now;
// review the diff before committing it.
package electiontest

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts with the output the code produces")

// Factory builds the state machine under test.
type Factory func(election.Config) (election.StateMachine, error)

// Run runs every testdata/*.txt transcript in dir against machines built by
// mk, each file in a subtest of its own.
func Run(t *testing.T, dir string, mk Factory) {
	t.Helper()
	RunScripts(t, dir, func() Script { return &driver{mk: mk} })
}

// Script runs one transcript's commands in order: Do returns what one
// command produced, as the transcript's expected output is written. Run's
// scripts drive one state machine; other drivers (the simulator's named
// elections) drive more with the same files and -rewrite.
type Script interface {
	Do(cmd string) string
}

// RunScripts runs every *.txt transcript in dir, each against a new Script
// and in a subtest of its own.
func RunScripts(t *testing.T, dir string, newScript func() Script) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no transcripts in %s", dir)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runFile(t, path, newScript()) })
	}
}

type block struct {
	line    int
	comment []string
	cmd     string
	want    string
}

func parse(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []block
	var cur *block
	inOut := false
	sc := bufio.NewScanner(f)
	n := 0
	var comments []string
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case inOut && l == "":
			blocks = append(blocks, *cur)
			cur, inOut = nil, false
		case inOut:
			cur.want += l + "\n"
		case cur == nil && l == "":
		case cur == nil && strings.HasPrefix(l, "#"):
			comments = append(comments, l)
		case cur == nil:
			cur = &block{line: n, cmd: l, comment: comments}
			comments = nil
		case l == "----":
			inOut = true
		default:
			return nil, fmt.Errorf("%s:%d: expected ---- after the command", path, n)
		}
	}
	if cur != nil {
		if !inOut {
			return nil, fmt.Errorf("%s:%d: command without ----", path, cur.line)
		}
		blocks = append(blocks, *cur)
	}
	return blocks, sc.Err()
}

func runFile(t *testing.T, path string, d Script) {
	blocks, err := parse(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for i, b := range blocks {
		got := d.Do(b.cmd)
		if *rewrite {
			blocks[i].want = got
		} else if got != b.want {
			t.Errorf("%s:%d: %s\n--- want\n%s--- got\n%s", path, b.line, b.cmd, b.want, got)
		}
		for _, c := range b.comment {
			out.WriteString(c + "\n")
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", b.cmd, blocks[i].want)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimSuffix(out.String(), "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// driver feeds one state machine and prints what comes out.
type driver struct {
	mk  Factory
	sm  election.StateMachine
	id  election.NodeID
	now int
	out strings.Builder
}

func (d *driver) printf(format string, a ...any) { fmt.Fprintf(&d.out, format+"\n", a...) }

func (d *driver) Do(cmd string) string {
	d.out.Reset()
	if err := d.exec(cmd); err != nil {
		d.printf("error: %v", err)
	}
	if d.out.Len() == 0 {
		d.printf("ok")
	}
	return d.out.String()
}

// Fields splits a command into its verb, its key=value arguments and its
// other words, in order.
func Fields(cmd string) (verb string, args map[string]string, pos []string) {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return "", nil, nil
	}
	args = map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	return f[0], args, pos
}

func (d *driver) exec(cmd string) error {
	verb, args, pos := Fields(cmd)
	if verb == "" {
		return fmt.Errorf("empty command")
	}
	if verb != "new" && d.sm == nil {
		return fmt.Errorf("no state machine: start with new")
	}
	switch verb {
	case "new":
		return d.newMachine(args, pos)
	case "tick":
		n := 1
		if len(pos) > 0 {
			var err error
			if n, err = strconv.Atoi(pos[0]); err != nil {
				return err
			}
		}
		for range n {
			d.now++
			d.sm.Tick()
			d.drain(fmt.Sprintf("@%d ", d.now))
		}
		return nil
	case "step":
		if len(pos) < 1 {
			return fmt.Errorf("step TYPE key=value... [reject] [confirmed] [elect]")
		}
		m, err := d.message(pos[0], args, pos[1:])
		if err != nil {
			return err
		}
		if err := d.sm.Step(m); err != nil {
			d.printf("rejected: %v", err)
		}
	case "join", "leave", "dead":
		m, err := member(args)
		if err != nil {
			return err
		}
		typ := map[string]election.EventType{"join": election.EventJoin, "leave": election.EventLeave, "dead": election.EventDead}[verb]
		d.sm.Observe(election.Event{Type: typ, Member: m})
	case "suspect":
		d.sm.Observe(election.Event{Type: election.EventLeaderTimeout})
	case "fail", "refused", "busy":
		if len(pos) < 1 {
			return fmt.Errorf("%s TYPE to=N key=value...", verb)
		}
		m, err := d.message(pos[0], args, pos[1:])
		if err != nil {
			return err
		}
		m.From = d.id
		typ := map[string]election.EventType{"fail": election.EventSendFailed, "refused": election.EventSendFailed, "busy": election.EventPeerBusy}[verb]
		d.sm.Observe(election.Event{Type: typ, Msg: m, Refused: verb == "refused"})
	case "campaign":
		d.sm.Campaign()
	case "resign":
		if err := d.sm.Resign(); err != nil {
			d.printf("error: %v", err)
		}
	case "transfer":
		to, err := parseID(args["to"])
		if err != nil {
			return err
		}
		if err := d.sm.Transfer(to); err != nil {
			d.printf("error: %v", err)
		}
	case "status":
		st := d.sm.Status()
		d.printf("status %s role=%v leader=%d leaderterm=%v term=%v members=%d excluded=%v rejected=%d",
			st.Algorithm, st.Role, st.Leader, st.LeaderTerm, st.Term, st.Members, st.Excluded, st.Rejected)
		if st.LeaseEnd != 0 {
			d.printf("lease now=%d end=%d", st.Now, st.LeaseEnd)
		}
		return nil
	default:
		return fmt.Errorf("unknown command %q", verb)
	}
	d.drain("")
	return nil
}

func (d *driver) newMachine(args map[string]string, pos []string) error {
	id, err := parseID(args["id"])
	if err != nil {
		return fmt.Errorf("id: %w", err)
	}
	cfg := election.Config{ID: id}
	for k, v := range args {
		var err error
		switch k {
		case "id":
		case "prio":
			cfg.Priority, err = strconv.ParseInt(v, 10, 64)
		case "peers":
			for _, p := range strings.Split(v, ",") {
				r, perr := parseRank(p)
				if perr != nil {
					return fmt.Errorf("peers: %w", perr)
				}
				cfg.Peers = append(cfg.Peers, election.Member{ID: r.ID, Priority: r.Priority})
			}
		case "quorum":
			cfg.Quorum, err = strconv.Atoi(v)
		case "bootstrap":
			cfg.BootstrapExpect, err = strconv.Atoi(v)
		case "term":
			cfg.Term, err = parseTerm(v)
		case "leaderterm":
			cfg.LeaderTerm, err = parseTerm(v)
		case "jitter":
			cfg.JitterTicks, err = strconv.Atoi(v)
		default:
			return fmt.Errorf("new: unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, p := range pos {
		switch p {
		case "preempt":
			cfg.Preempt = true
		default:
			return fmt.Errorf("new: unknown flag %q", p)
		}
	}
	sm, err := d.mk(cfg)
	if err != nil {
		return err
	}
	d.sm, d.id, d.now = sm, id, 0
	return nil
}

func (d *driver) drain(prefix string) {
	for d.sm.HasReady() {
		rd := d.sm.Ready()
		if rd.Term != 0 {
			d.printf("%spersist %v", prefix, rd.Term)
		}
		if rd.LeaderTerm != 0 {
			d.printf("%spersist-leader %v", prefix, rd.LeaderTerm)
		}
		if c := rd.Change; c != nil {
			d.printf("%schange %v leader=%d term=%v", prefix, c.Role, c.Leader, c.Term)
		}
		for _, m := range rd.Messages {
			d.printf("%ssend %s", prefix, Format(m))
		}
	}
}

// Format prints a message on one line: its type, sender and receiver, term,
// and every other field that is not zero, in a fixed order.
func Format(m election.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %d->%d term=%v", m.Type, m.From, m.To, m.Term)
	if m.Leader != 0 {
		fmt.Fprintf(&b, " leader=%d", m.Leader)
	}
	if m.Initiator != 0 {
		fmt.Fprintf(&b, " initiator=%d", m.Initiator)
	}
	if m.InitiatorRank != (election.Rank{}) {
		fmt.Fprintf(&b, " irank=%s", formatRank(m.InitiatorRank))
	}
	if len(m.Candidates) > 0 {
		rs := make([]string, len(m.Candidates))
		for i, r := range m.Candidates {
			rs[i] = formatRank(r)
		}
		fmt.Fprintf(&b, " cands=%s", strings.Join(rs, ","))
	}
	if m.Stamp != 0 {
		fmt.Fprintf(&b, " stamp=%d", m.Stamp)
	}
	if m.Support != 0 {
		fmt.Fprintf(&b, " support=%d", m.Support)
	}
	if m.MaxTerm != 0 {
		fmt.Fprintf(&b, " maxterm=%v", m.MaxTerm)
	}
	if m.FromRank != (election.Rank{}) {
		fmt.Fprintf(&b, " fromrank=%s", formatRank(m.FromRank))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{m.Reject, "reject"}, {m.Confirmed, "confirmed"}, {m.Elect, "elect"}, {m.Release, "release"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	return b.String()
}

// formatRank writes a rank as its id, with the priority after a colon when
// it is not zero: 3, or 3:2.
func formatRank(r election.Rank) string {
	if r.Priority == 0 {
		return strconv.FormatUint(uint64(r.ID), 10)
	}
	return fmt.Sprintf("%d:%d", r.ID, r.Priority)
}

func parseRank(s string) (election.Rank, error) {
	id, prio, hasPrio := strings.Cut(s, ":")
	var r election.Rank
	var err error
	if r.ID, err = parseID(id); err != nil {
		return r, err
	}
	if hasPrio {
		r.Priority, err = strconv.ParseInt(prio, 10, 64)
	}
	return r, err
}

func parseID(s string) (election.NodeID, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	return election.NodeID(v), err
}

// parseTerm reads epoch.slot.
func parseTerm(s string) (election.Term, error) {
	e, sl, ok := strings.Cut(s, ".")
	if !ok {
		return 0, fmt.Errorf("term %q: want epoch.slot", s)
	}
	ev, err := strconv.ParseUint(e, 10, 64)
	if err != nil {
		return 0, err
	}
	sv, err := strconv.ParseUint(sl, 10, 64)
	if err != nil {
		return 0, err
	}
	return election.Term(ev<<election.SlotBits | sv), nil
}

func member(args map[string]string) (election.Member, error) {
	r, err := parseRank(args["id"])
	if err != nil {
		return election.Member{}, fmt.Errorf("id: %w", err)
	}
	return election.Member{ID: r.ID, Priority: r.Priority}, nil
}

var types = func() map[string]election.MsgType {
	m := map[string]election.MsgType{}
	for t := election.MsgElection; t <= election.LastMsgType; t++ {
		m[t.String()] = t
	}
	return m
}()

func (d *driver) message(typ string, args map[string]string, flags []string) (election.Message, error) {
	t, ok := types[typ]
	if !ok {
		return election.Message{}, fmt.Errorf("unknown message type %q", typ)
	}
	m := election.Message{Type: t, To: d.id}
	for k, v := range args {
		var err error
		switch k {
		case "from":
			m.From, err = parseID(v)
		case "to":
			m.To, err = parseID(v)
		case "term":
			m.Term, err = parseTerm(v)
		case "leader":
			m.Leader, err = parseID(v)
		case "initiator":
			m.Initiator, err = parseID(v)
		case "irank":
			m.InitiatorRank, err = parseRank(v)
		case "cands":
			for _, c := range strings.Split(v, ",") {
				r, perr := parseRank(c)
				if perr != nil {
					return m, fmt.Errorf("cands: %w", perr)
				}
				m.Candidates = append(m.Candidates, r)
			}
		case "maxterm":
			m.MaxTerm, err = parseTerm(v)
		case "fromrank":
			m.FromRank, err = parseRank(v)
		case "stamp":
			m.Stamp, err = strconv.ParseUint(v, 10, 64)
		case "support":
			var u uint64
			u, err = strconv.ParseUint(v, 10, 32)
			m.Support = uint32(u)
		default:
			return m, fmt.Errorf("%v: unknown key %q", t, k)
		}
		if err != nil {
			return m, fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, fl := range flags {
		switch fl {
		case "reject":
			m.Reject = true
		case "confirmed":
			m.Confirmed = true
		case "elect":
			m.Elect = true
		case "release":
			m.Release = true
		default:
			return m, fmt.Errorf("%v: unknown flag %q", t, fl)
		}
	}
	return m, nil
}
