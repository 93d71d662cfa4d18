package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/electord/electord/api"
	"github.com/electord/electord/election"
	"github.com/electord/electord/membership"
	"github.com/electord/electord/node"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
)

// notProduct are the directories of the product module's tree that hold no
// product code: the tools and e2e modules (any directory with a go.mod of
// its own is skipped too) and the generated protobuf code.
var notProduct = []string{"tools", "e2e", "proto"}

// notConfigured are the defaults a product package may keep: values no
// configuration key sets, each with the reason. A key is "dir.Name".
var notConfigured = map[string]string{
	"client.DefaultDialTimeout": "the Go client library's option, set by the program that uses it; no electord key",
	"client.DefaultBackoffMin":  "the Go client library's option, set by the program that uses it; no electord key",
	"client.DefaultBackoffMax":  "the Go client library's option, set by the program that uses it; no electord key",
	"client.DefaultKeepalive":   "the Go client library's option, set by the program that uses it; no electord key",

	"election.withDefaults": "the core's tick counts: the node computes every one from configuration (node.Config); " +
		"the zero-fill serves the simulator and the algorithms' tests",
	"election.Defaults": "election.Config.Defaults shows the tick counts withDefaults fills in (see above)",

	"k8s/leaderslice.defaults": "the EndpointSlice writer's own timings (resync, back-off, request timeout); no key",

	"membership.DefaultGossipPort": "the port a join seed written without one is dialled at, memberlist's well-known port; no key",
	"membership.DefaultKeyPoll":    "how often the gossip key file is checked for a change; no key (tests shorten it)",
	"security.DefaultPoll":         "how often the TLS files are checked for a change; no key (tests shorten it)",

	"status.DefaultMaxClients":        "the status page's bound on event streams; no key",
	"status.DefaultMaxClientsPerAddr": "the status page's bound on one address's event streams; no key",
	"status.DefaultPoll":              "how often an open status page asks the members; no key",
	"status.DefaultAskTimeout":        "how long the status page waits for one member; no key",

	"transport.DefaultSendTimeout":      "a peer RPC's deadline: the transport's own timing, no key (tests shorten it)",
	"transport.DefaultQueueLen":         "the per-peer send queue's length: the transport's own sizing, no key",
	"transport.DefaultNamedQueueLen":    "the per-peer set of named elections' messages: the transport's own sizing, no key",
	"transport.DefaultReconnectBackoff": "the cap on redial back-off: the transport's own timing, no key",
	"transport.DefaultProbeTimeout":     "the confirming re-dial of a refused peer: the transport's own timing, no key",
	"transport.DefaultCutDelay":         "the in-memory twin's (a test network's) delay; no key",

	"transport/lf.DefaultReadBudget":          "bytes read from one connection per turn: the pool's own fairness, no key",
	"transport/lf/engine.DefaultStreamWindow": "the HTTP/2 stream window the engine advertises; no key",
	"transport/lf/engine.DefaultConnWindow":   "the HTTP/2 connection window the engine advertises; no key",
}

// defaultName matches a declaration that holds a default, and defaulter a
// function that fills one in.
var (
	defaultName = regexp.MustCompile(`^[Dd]efault`)
	defaulter   = regexp.MustCompile(`(?i)^(or|with|set|apply|fill)?defaults?$`)
)

// A default is set in one place, this package: a product package that
// declares a Default* constant or variable, or an orDefault / withDefaults
// / defaults function, for a value a configuration key sets, fails here.
// Values that no key sets are listed in notConfigured with the reason.
func TestNoDefaultsOutsideConfig(t *testing.T) {
	decls := productDefaults(t, "..")
	for _, f := range decls {
		if _, ok := notConfigured[f.key]; !ok {
			t.Errorf("%s: %s declares a default outside package config; put it in config.Default "+
				"(or, if no configuration key sets it, list it in notConfigured with the reason)", f.pos, f.key)
		}
	}
	for k := range notConfigured {
		if !slices.ContainsFunc(decls, func(f found) bool { return f.key == k }) {
			t.Errorf("notConfigured lists %s, which no product package declares any more: remove it", k)
		}
	}
}

type found struct{ key, pos string }

// productDefaults lists the defaults the product packages under root
// declare outside package config.
func productDefaults(t *testing.T, root string) []found {
	t.Helper()
	var out []found
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "config" || slices.Contains(notProduct, rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		add := func(name string, pos token.Pos) {
			out = append(out, found{key: dir + "." + name, pos: fset.Position(pos).String()})
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				if decl.Tok != token.CONST && decl.Tok != token.VAR {
					continue
				}
				for _, spec := range decl.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if defaultName.MatchString(n.Name) {
							add(n.Name, n.Pos())
						}
					}
				}
			case *ast.FuncDecl:
				if defaulter.MatchString(decl.Name.Name) {
					add(decl.Name.Name, decl.Name.Pos())
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The guard sees what it is meant to: a Default constant, an orDefault
// function and a withDefaults method in a product package are found.
func TestGuardFindsDefaults(t *testing.T) {
	root := t.TempDir()
	src := "package x\n\nconst DefaultMaxConns = 4096\n\nvar defaultTick = 1\n\n" +
		"func orDefault(v, d int) int { return v }\n\ntype C struct{}\n\nfunc (C) withDefaults() C { return C{} }\n"
	for _, p := range []string{"x/x.go", "tools/y/y.go", "config/z.go"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(strings.Replace(src, "package x", "package "+filepath.Base(filepath.Dir(p)), 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, f := range productDefaults(t, root) {
		keys = append(keys, f.key)
	}
	slices.Sort(keys)
	if want := []string{"x.DefaultMaxConns", "x.defaultTick", "x.orDefault", "x.withDefaults"}; !slices.Equal(keys, want) {
		t.Fatalf("found %v, want %v (tools/ and config/ skipped)", keys, want)
	}
}

// nopReceiver is a transport.Receiver that takes nothing.
type nopReceiver struct{}

func (nopReceiver) Receive(transport.Inbound) error { return nil }
func (nopReceiver) Failed(election.Message, error)  {}
func (nopReceiver) String() string                  { return "nop" }

var _ transport.Receiver = nopReceiver{}

// A component built from a zero configuration refuses it and names the
// field it needed, instead of taking a default of its own.
func TestComponentsRefuseZeroConfig(t *testing.T) {
	check := func(what string, err error, field string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s from a zero config: %v, want an error naming %s", what, err, field)
		}
	}
	_, err := api.NewLimitedGRPCServer(nil, api.Limits{})
	check("api.NewLimitedGRPCServer", err, "MaxWatchers (max-watchers)")
	check("engine.Limits", engine.Limits{}.Validate(), "MaxRecvMsgBytes (max-message-bytes)")
	if runtime.GOOS == "linux" {
		_, err = lf.New(engine.NewRegistry(), lf.Config{})
		check("lf.New", err, "MaxConns (max-conns)")
	}
	_, err = transport.NewGRPC(transport.GRPCConfig{Self: 1, Receiver: nopReceiver{}})
	check("transport.NewGRPC", err, "MaxMessageBytes")
	_, err = membership.New(membership.Config{Self: membership.Meta{ID: 1}, BindAddr: "127.0.0.1:0"})
	check("membership.New", err, "gossip-preset")
	_, err = node.New(node.Config{})
	check("node.New", err, "HeartbeatInterval (heartbeat-interval)")
}
