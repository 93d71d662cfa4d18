// Package status serves the live status page of one node: the members in
// ring order and in bully rank, each one's liveness and role, who leads and
// since when, the node's timeline of leader changes, its last elections,
// and any disagreement between the nodes about who leads, in red.
//
// The page is Go's html/template with embedded static files and a little
// plain JavaScript; nothing is fetched from elsewhere. It updates over
// Server-Sent Events (GET /status/events): the server renders the same
// template and pushes the HTML when it changes. While at least one page is
// open one poller runs: it re-renders on every leadership event of the node
// and, every Poll, asks each live member who it thinks leads. With no page
// open nothing runs.
package status

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/electord/electord/node"
)

// Defaults for Config.
const (
	DefaultMaxClients = 16
	// DefaultMaxClientsPerAddr: one client address may hold at most half
	// the streams, so it cannot lock everyone else out.
	DefaultMaxClientsPerAddr = DefaultMaxClients / 2
	DefaultPoll              = time.Second
	DefaultAskTimeout        = 500 * time.Millisecond
)

// Config configures a status page.
type Config struct {
	Node *node.Node
	// PeerCreds, given a member's id, dial that member's client API to ask
	// who it thinks leads: the node's own certificate when TLS is on, and
	// the member answering must present id's certificate
	// (security.Material.ForwardCredentials). Nil: plaintext.
	PeerCreds func(id uint64) credentials.TransportCredentials
	// MaxClients bounds the event streams open at once; more are refused
	// with 503. Default DefaultMaxClients.
	MaxClients int
	// MaxClientsPerAddr bounds the event streams open at once from one
	// remote address (the connection's, not a header's); more are refused
	// with 503. Pages opened through kubectl port-forward or kubectl proxy
	// all come from one address. Default: half of MaxClients, at least 1.
	MaxClientsPerAddr int
	// Poll is how often the members are asked while a page is open.
	// Default DefaultPoll.
	Poll time.Duration
	// AskTimeout bounds one member's answer. Default DefaultAskTimeout.
	AskTimeout time.Duration
	Logger     *slog.Logger
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Server serves the page. Create it with New.
type Server struct {
	cfg    Config
	tmpl   *template.Template
	static http.Handler

	mu      sync.Mutex
	clients map[*client]struct{}
	stop    context.CancelFunc // the running poller's; nil when none runs
	done    chan struct{}      // closed when the running poller returned
	last    []byte             // the view the poller last rendered

	onceMu   sync.Mutex
	onceView []byte // the last view built for a page load (see once)
	onceAt   time.Time

	renders atomic.Uint64 // views built (for tests: nothing runs while no page is open)
}

// client is one open event stream. Its channel holds the newest view only.
type client struct {
	ch   chan []byte
	addr string // the remote address's host
}

// New builds the page's server.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, fmt.Errorf("status: Config.Node is required")
	}
	cfg.MaxClients = cmp.Or(cfg.MaxClients, DefaultMaxClients)
	cfg.MaxClientsPerAddr = cmp.Or(cfg.MaxClientsPerAddr, max(1, cfg.MaxClients/2))
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.AskTimeout = cmp.Or(cfg.AskTimeout, DefaultAskTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("page").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, tmpl: tmpl, static: http.StripPrefix("/status/static/", http.FileServerFS(static)),
		clients: map[*client]struct{}{}}, nil
}

// Mount adds the page's paths to mux: GET /status (the page), GET
// /status/events (its event stream), GET /status/elections (the named
// elections as JSON, by page), GET /status/static/ (its script and style
// sheet), and GET / redirecting to status (relative).
func (s *Server) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		// A relative Location (http.Redirect would make it absolute), so
		// the redirect also works behind a path prefix.
		w.Header().Set("Location", "status")
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("GET /status", s.page)
	mux.HandleFunc("GET /status/events", s.events)
	mux.HandleFunc("GET /status/elections", s.elections)
	mux.Handle("GET /status/static/", s.static)
}

var funcs = template.FuncMap{
	"utc": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"rfc": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"ms": func(d time.Duration) string {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	},
	"lower": strings.ToLower,
}

// render builds the view and renders its HTML fragment.
func (s *Server) render(ctx context.Context, a asker) ([]byte, error) {
	s.renders.Add(1)
	v := build(ctx, s.cfg.Node, a, s.cfg.AskTimeout)
	var b bytes.Buffer
	err := s.tmpl.ExecuteTemplate(&b, "view", v)
	return b.Bytes(), err
}

// page serves the whole page, with the view as of now: the poller's last
// one if a page is open, else one built for this request.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	view := s.last
	s.mu.Unlock()
	if view == nil {
		var err error
		if view, err = s.once(r.Context()); err != nil {
			http.Error(w, "status: rendering the view: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	data := struct {
		Node   uint64
		View   template.HTML
		Poll   time.Duration
		Served time.Time
	}{uint64(s.cfg.Node.Self()), template.HTML(view), s.cfg.Poll, time.Now()} // view is the template's own output
	if err := s.tmpl.ExecuteTemplate(w, "page.html", data); err != nil {
		s.cfg.Logger.Warn("status page", "err", err)
	}
}

// once builds a view for a page load while no poller runs. Loads within
// one Poll share it (and wait for one another), so reloading the page,
// or many clients loading it, asks the members at most once per Poll:
// page loads never run two renders at once, so with the poller at most
// two views are being built at any time, each asking at most maxAsks
// members at once.
func (s *Server) once(ctx context.Context) ([]byte, error) {
	s.onceMu.Lock()
	defer s.onceMu.Unlock()
	if s.onceView != nil && time.Since(s.onceAt) < s.cfg.Poll {
		return s.onceView, nil
	}
	a := newAsker(s.cfg.PeerCreds)
	defer a.close()
	// Not the request's context: the view is shared, and a load that gave
	// up must not leave the others a view of members "suspect: canceled".
	// Each ask is bounded by AskTimeout.
	view, err := s.render(context.WithoutCancel(ctx), a)
	if err != nil {
		return nil, err
	}
	s.onceView, s.onceAt = view, time.Now()
	return view, nil
}

// events streams the view as Server-Sent Events ("view" events whose data
// is the HTML fragment), one when the stream opens and one per change.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "status: streaming unsupported", http.StatusInternalServerError)
		return
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	c := &client{ch: make(chan []byte, 1), addr: host}
	if err := s.join(c); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer s.leave(c)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprintf(w, "retry: %d\n\n", (2 * time.Second).Milliseconds())
	fl.Flush()
	keep := time.NewTicker(25 * time.Second) // a comment keeps proxies from closing an idle stream
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.cfg.Node.Done():
			// The node stopped: end the stream, so the server's shutdown
			// does not wait for a page that would never go idle.
			return
		case view := <-c.ch:
			if err := writeEvent(w, "view", view); err != nil {
				return
			}
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		fl.Flush()
	}
}

// writeEvent writes one event; each line of data is its own data: field.
// Lines end at CRLF, CR or LF, as an SSE client splits them: a bare CR in
// the data (a member's name, a peer's error text) must not end a data:
// line early and start a field of the sender's choosing.
func writeEvent(w io.Writer, event string, data []byte) error {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for {
		b.WriteString("data: ")
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			b.Write(data)
			b.WriteByte('\n')
			break
		}
		b.Write(data[:i])
		b.WriteByte('\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// TooManyError refuses an event stream beyond MaxClients.
type TooManyError struct{ Max int }

func (e TooManyError) Error() string {
	return fmt.Sprintf("status: %d status pages are open already, the most this node serves at once; close one and reload", e.Max)
}

// TooManyFromError refuses an event stream beyond MaxClientsPerAddr from
// one address.
type TooManyFromError struct {
	Max  int
	Addr string
}

func (e TooManyFromError) Error() string {
	return fmt.Sprintf("status: %d status pages are open from %s already, the most this node serves to one address; close one and reload", e.Max, e.Addr)
}

// join adds an event stream, starting the poller for the first one.
func (s *Server) join(c *client) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.clients) >= s.cfg.MaxClients {
		return TooManyError{s.cfg.MaxClients}
	}
	from := 0
	for o := range s.clients {
		if o.addr == c.addr {
			from++
		}
	}
	if from >= s.cfg.MaxClientsPerAddr {
		return TooManyFromError{s.cfg.MaxClientsPerAddr, c.addr}
	}
	s.clients[c] = struct{}{}
	if s.last != nil {
		c.ch <- s.last
	}
	if s.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.stop, s.done = cancel, make(chan struct{})
		go s.poll(ctx, s.done)
	}
	return nil
}

// leave removes an event stream, stopping the poller with the last one.
func (s *Server) leave(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, c)
	if len(s.clients) == 0 && s.stop != nil {
		s.stop()
		s.stop, s.last = nil, nil
	}
}

// Clients is how many event streams are open.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// Idle returns a channel closed once no poller runs (no page open, and the
// last poller returned).
func (s *Server) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return s.done
}

// poll renders the view at once, on every leadership event of the node and
// every Poll, and pushes it to the open pages when it changed.
func (s *Server) poll(ctx context.Context, done chan struct{}) {
	defer close(done)
	a := newAsker(s.cfg.PeerCreds)
	defer a.close()
	sub := s.cfg.Node.Subscribe()
	defer sub.Close()
	events := sub.C()
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	var last []byte
	for {
		view, err := s.render(ctx, a)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.cfg.Logger.Warn("status page: rendering the view", "err", err)
		} else if !bytes.Equal(view, last) {
			last = view
			s.push(ctx, view)
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil // the node stopped: keep polling the members
			}
			drain(events)
		case <-tick.C:
		}
	}
}

// drain takes every event already queued: one render covers them all.
func drain(ch <-chan node.LeaderInfo) {
	for ch != nil {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// push hands view to every open page, replacing one it has not sent yet.
func (s *Server) push(ctx context.Context, view []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return // a poller that was stopped must not overwrite a newer one's view
	}
	s.last = view
	for c := range s.clients {
		select {
		case <-c.ch:
		default:
		}
		c.ch <- view
	}
}
