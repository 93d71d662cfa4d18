// Package history records what electord's users see, from outside the
// nodes, and checks it. A Poller asks every node's sidecar, again and again,
// GET /leader/self (does this node claim to lead, at which term) and
// GET /leader (whom it follows, at which term), and records each answer with
// the interval [Sent, Recv] in which the node produced it. The harness adds
// what it did to the network and the processes (Topology, Heal, Calm).
// Check then judges the whole history against the rules in rules.go.
//
// A named election is recorded the same way, by a Poller with the
// election's Prefix (/elections/NAME/leader and /leader/self) into a
// Recorder of its own, with the candidate apps' standings (App); Check
// judges it with Config.Named.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/electord/electord/api"
)

// Kind is which endpoint an observation asked.
type Kind uint8

// Endpoints.
const (
	Self   Kind = iota // GET /leader/self
	Leader             // GET /leader
)

func (k Kind) String() string {
	if k == Self {
		return "/leader/self"
	}
	return "/leader"
}

// Obs is one answer (or failure) of one node's sidecar.
type Obs struct {
	Node       int
	Kind       Kind
	Sent, Recv time.Time // the answer was produced at some instant in between
	Err        string    // no answer (refused, timed out): nothing else is set
	Code       int       // HTTP status
	ID         uint64    // /leader: the leader's id, 0 = none
	Term       uint64
	Self       bool // the body's "self"
	State      string
	// Decided (zero when unknown) is the node's own window, by its wall
	// clock, within which it decided the answer (api.DecidedHeader): kept
	// only when it lies within [Sent, Recv], which holds when the poller
	// and the node share a clock (one host), so that windows of different
	// nodes can be ordered. It is a microsecond or two wide where
	// [Sent, Recv] is a round trip.
	DecidedFrom, DecidedTo time.Time
}

// Window is the interval within which o's answer was decided: Decided
// when known, else [Sent, Recv].
func (o Obs) Window() (from, to time.Time) {
	if !o.DecidedFrom.IsZero() {
		return o.DecidedFrom, o.DecidedTo
	}
	return o.Sent, o.Recv
}

// Claim reports whether o is a node claiming leadership: /leader/self 200.
func (o Obs) Claim() bool { return o.Err == "" && o.Kind == Self && o.Code == http.StatusOK }

// Leads returns who o says leads (0: nobody, or no answer).
func (o Obs) Leads() uint64 {
	switch {
	case o.Err != "":
		return 0
	case o.Kind == Leader && o.Code == http.StatusOK:
		return o.ID
	case o.Claim():
		return uint64(o.Node)
	}
	return 0
}

// Topology is, from At on, which nodes are up (running, not paused) and
// which links are cut (Cut[from][to]: packets from from to to dropped).
// Indexes are node ids; index 0 is unused.
type Topology struct {
	At  time.Time
	Up  []bool
	Cut [][]bool
}

// Heal is a moment at which every link was restored and every node was up:
// one leader must be agreed soon after.
type Heal struct {
	At   time.Time
	What string // the fault that ended
	// Kind groups heals for the per-kind figures (the fault kind); ""
	// groups by What.
	Kind string
}

// Calm is a fault that touched only followers (Affected) of Leader, who
// led at Term when it began. From From to To the other nodes must go on
// following Leader, and after the fault Leader still leads. With quorum
// the term must stay Term throughout; in plain mode it may rise (see
// checker.keeps).
type Calm struct {
	From, To time.Time
	Leader   uint64
	Term     uint64
	Affected []int
	What     string
}

// App is a change of one node's candidacy in a named election: from At on,
// an app of Node stands there (Standing), may stand there (Starting), or
// none does (its app was killed, exited with its node, or exited before it
// stood).
type App struct {
	At       time.Time
	Node     int
	Standing bool
	// Starting: an app process of Node was started and has not yet said
	// that it stands. Its node registers the candidacy (and may lead for
	// it) before the app's word reaches the recorder: the app's stream
	// gets its first event, the app prints a line, the harness reads it,
	// each a wake-up of a busy process; at a load of 25 on 2 cores that
	// took up to 1.5 s, longer than a restarted node waits before it
	// campaigns. So the rules count a starting app as standing.
	Starting bool
}

// MayStand says whether, from a.At on, an app may stand.
func (a App) MayStand() bool { return a.Standing || a.Starting }

// Recorder collects a history. It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	obs    []Obs
	topo   []Topology
	heals  []Heal
	calms  []Calm
	notes  []Note
	apps   []App
	latest map[[2]int]Obs // node, kind -> latest answer
	wake   chan struct{}
	// runs (NewCompactRecorder): per node and kind, the answer last kept
	// and the latest one dropped since; marks: the times of the other
	// records, sorted.
	runs  map[[2]int]*run
	marks []time.Time
}

// run is one node's answers of one kind since the one last kept that
// repeat it; recent holds every answer of the last markLag before the
// newest (the newest last), each marked kept or not.
type run struct {
	kept   Obs
	recent []seen
}

type seen struct {
	o    Obs
	kept bool
}

// end keeps the run's newest answer if it was dropped (r.mu held).
func (r *Recorder) end(ru *run) {
	if n := len(ru.recent); n > 0 && !ru.recent[n-1].kept {
		ru.recent[n-1].kept = true
		ru.kept = ru.recent[n-1].o
		r.obs = append(r.obs, ru.kept)
	}
}

// markLag is how long before it is made a record's time may be: every
// answer of that long is kept at hand, and the first one sent at or after
// the record's time is kept when the record comes, even past a change of
// answer. The schedule records a heal, a topology change or an app's
// change within milliseconds of its time.
const markLag = time.Second

// Note is a line of the fault log.
type Note struct {
	At   time.Time
	Text string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{latest: map[[2]int]Obs{}, wake: make(chan struct{})}
}

// NewCompactRecorder returns an empty Recorder that keeps, of a node's
// answers of one kind that repeat the same answer, the first and the last
// of each run, and the first sent at or after every other record's time (a
// topology change, a heal, a calm, an app's change), as the rules need
// them: a rule judges what an answer says and when, and the run's ends
// bound when it was said. A node's answers of one kind must be added in the
// order they were sent (ListPoller's are: one round after the other). The rules' verdicts and heal times are the same
// as on every answer (plain mode; a withdrawn-leads violation may be dated
// at its run's end rather than at its first answer past the bound, and the
// two-claim episodes of overlapping runs are counted by their ends only).
// An observer of a thousand elections polled five times a second otherwise
// holds gigabytes, and a Go heap that large stalled it for seconds at a
// time (the chaos runs with --one-stream).
func NewCompactRecorder() *Recorder {
	r := NewRecorder()
	r.runs = map[[2]int]*run{}
	return r
}

// Add records an observation.
func (r *Recorder) Add(o Obs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]int{o.Node, int(o.Kind)}
	r.latest[k] = o
	close(r.wake)
	r.wake = make(chan struct{})
	if r.runs != nil {
		ru := r.runs[k]
		if ru == nil {
			ru = &run{}
			r.runs[k] = ru
		}
		i := 0
		for i < len(ru.recent) && ru.recent[i].o.Sent.Before(o.Sent.Add(-markLag)) {
			i++
		}
		ru.recent = ru.recent[i:]
		if len(ru.recent) > 0 && sameAnswer(ru.kept, o) && !r.markedBetween(ru.kept.Sent, o.Sent) {
			ru.recent = append(ru.recent, seen{o: o})
			return
		}
		r.end(ru)
		ru.kept, ru.recent = o, append(ru.recent, seen{o: o, kept: true})
	}
	r.obs = append(r.obs, o)
}

// markedBetween: a record's time lies in (from, to]. Answers are recorded
// after their round trip, so one sent before a record may be added after
// it: the record's time, not the order of adding, says which answer is its
// first after.
func (r *Recorder) markedBetween(from, to time.Time) bool {
	i := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].After(from) })
	return i < len(r.marks) && !r.marks[i].After(to)
}

// sameAnswer: a and b say the same (their times aside).
func sameAnswer(a, b Obs) bool {
	return a.Err == b.Err && a.Code == b.Code && a.ID == b.ID && a.Term == b.Term && a.Self == b.Self && a.State == b.State
}

// mark notes a record of time at (r.mu held): each node's first answer of
// each kind sent at or after at is kept, now if it came already, else when
// it comes, whatever it says.
func (r *Recorder) mark(at time.Time) {
	if r.runs == nil {
		return
	}
	for _, ru := range r.runs {
		if i := slices.IndexFunc(ru.recent, func(x seen) bool { return !x.o.Sent.Before(at) }); i >= 0 && !ru.recent[i].kept {
			ru.recent[i].kept = true // the first sent since at, added before the record
			r.obs = append(r.obs, ru.recent[i].o)
		}
	}
	i, _ := slices.BinarySearchFunc(r.marks, at, time.Time.Compare)
	r.marks = slices.Insert(r.marks, i, at)
}

// Topology records a change of the network or of the processes.
func (r *Recorder) Topology(t Topology) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mark(t.At)
	r.topo = append(r.topo, t)
}

// Heal records a heal.
func (r *Recorder) Heal(h Heal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mark(h.At)
	r.heals = append(r.heals, h)
}

// Calm records a follower-only fault.
func (r *Recorder) Calm(c Calm) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mark(c.To)
	r.calms = append(r.calms, c)
}

// App records a change of a node's candidacy (named elections).
func (r *Recorder) App(a App) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mark(a.At)
	r.apps = append(r.apps, a)
}

// Notef adds a line to the fault log.
func (r *Recorder) Notef(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, Note{time.Now(), fmt.Sprintf(format, a...)})
}

// History is a copy of everything recorded.
type History struct {
	Obs   []Obs
	Topo  []Topology
	Heals []Heal
	Calms []Calm
	Notes []Note
	Apps  []App
}

// History returns a copy of what was recorded so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	obs := slices.Clone(r.obs)
	for _, ru := range r.runs {
		if n := len(ru.recent); n > 0 && !ru.recent[n-1].kept {
			obs = append(obs, ru.recent[n-1].o) // the open runs' ends
		}
	}
	return History{Obs: obs, Topo: slices.Clone(r.topo), Heals: slices.Clone(r.heals),
		Calms: slices.Clone(r.calms), Notes: slices.Clone(r.notes), Apps: slices.Clone(r.apps)}
}

// Agreement is one leader that every node named agrees on.
type Agreement struct {
	Leader, Term uint64
	At           time.Time // when the observer knew: the latest Recv of the answers
}

// agreed says whether the latest answers of nodes, all sent at or after
// since, agree on one leader that itself claims at that term.
func agreed(latest func(node int, k Kind) (Obs, bool), nodes []int, since time.Time) (Agreement, bool) {
	var a Agreement
	for _, n := range nodes {
		for _, k := range []Kind{Leader, Self} {
			o, ok := latest(n, k)
			if !ok || o.Err != "" || o.Sent.Before(since) {
				return Agreement{}, false
			}
			if o.Recv.After(a.At) {
				a.At = o.Recv
			}
		}
		o, _ := latest(n, Leader)
		if o.Code != http.StatusOK || o.ID == 0 || (a.Leader != 0 && (o.ID != a.Leader || o.Term != a.Term)) {
			return Agreement{}, false
		}
		a.Leader, a.Term = o.ID, o.Term
	}
	if a.Leader == 0 || !slices.Contains(nodes, int(a.Leader)) {
		return Agreement{}, false
	}
	if s, _ := latest(int(a.Leader), Self); !s.Claim() || s.Term != a.Term {
		return Agreement{}, false
	}
	return a, true
}

// WaitAgreed waits until the latest answers of nodes, sent at or after
// since, agree on one leader (see Agreement), or until timeout.
func (r *Recorder) WaitAgreed(nodes []int, since time.Time, timeout time.Duration) (Agreement, bool) {
	var a Agreement
	ok := r.WaitFor(timeout, func(latest func(n int, k Kind) (Obs, bool)) bool {
		var ok bool
		a, ok = agreed(latest, nodes, since)
		return ok
	})
	return a, ok
}

// WaitFor waits until cond holds, or until timeout; it reports which.
// cond gets each node's latest answer of each kind; it is called now and
// after every answer recorded, with the Recorder locked (it must not call
// the Recorder).
func (r *Recorder) WaitFor(timeout time.Duration, cond func(latest func(n int, k Kind) (Obs, bool)) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	latest := func(n int, k Kind) (Obs, bool) {
		o, ok := r.latest[[2]int{n, int(k)}]
		return o, ok
	}
	for {
		r.mu.Lock()
		ok := cond(latest)
		wake := r.wake
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-wake:
		case <-deadline.C:
			return false
		}
	}
}

// Latest returns node n's latest answer of kind k.
func (r *Recorder) Latest(n int, k Kind) (Obs, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.latest[[2]int{n, int(k)}]
	return o, ok
}

// Poller asks nodes' sidecars for /leader/self and /leader, one node at a
// time per goroutine, every Period.
type Poller struct {
	Client  *http.Client
	URLs    map[int]string // node id -> base URL ("http://host:port")
	Period  time.Duration  // pause between two rounds of one node; 0 = 20ms
	Timeout time.Duration  // per request; 0 = 150ms
	Rec     *Recorder
	// Prefix goes before /leader and /leader/self: "" for the default
	// election, "/elections/NAME" for a named one.
	Prefix string
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	period, timeout := p.Period, p.Timeout
	if period == 0 {
		period = 20 * time.Millisecond
	}
	if timeout == 0 {
		timeout = 150 * time.Millisecond
	}
	pollNodes(ctx, p.URLs, period, func(id int, url string) {
		for _, k := range []Kind{Self, Leader} {
			o := p.ask(ctx, id, url, k, timeout)
			if ctx.Err() != nil {
				return
			}
			p.Rec.Add(o)
		}
	})
}

// pollNodes runs round for every node of urls, each in a goroutine of its
// own, once every period (or as soon as the last round ended, if later),
// until ctx ends.
func pollNodes(ctx context.Context, urls map[int]string, period time.Duration, round func(id int, url string)) {
	var wg sync.WaitGroup
	for id, url := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(period)
			defer t.Stop()
			for ctx.Err() == nil {
				round(id, url)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}()
	}
	wg.Wait()
}

// body is the union of /leader and /leader/self's JSON.
type body struct {
	ID    uint64 `json:"id"`
	Term  uint64 `json:"term"`
	Self  bool   `json:"self"`
	State string `json:"state"`
}

func (p *Poller) ask(ctx context.Context, id int, url string, k Kind, timeout time.Duration) Obs {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := p.Prefix + "/leader"
	if k == Self {
		path += "/self"
	}
	o := Obs{Node: id, Kind: k, Sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
	if err != nil {
		o.Err, o.Recv = err.Error(), time.Now()
		return o
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		o.Err, o.Recv = err.Error(), time.Now()
		return o
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	o.Recv = time.Now()
	if err != nil {
		o.Err = err.Error()
		return o
	}
	var v body
	if err := json.Unmarshal(b, &v); err != nil {
		o.Err = fmt.Sprintf("status %d, bad JSON: %v", resp.StatusCode, err)
		return o
	}
	o.Code, o.ID, o.Term, o.Self, o.State = resp.StatusCode, v.ID, v.Term, v.Self, v.State
	if from, to, ok := api.ParseDecided(resp.Header.Get(api.DecidedHeader)); ok && !from.Before(o.Sent) && !to.After(o.Recv) {
		o.DecidedFrom, o.DecidedTo = from, to
	}
	return o
}
