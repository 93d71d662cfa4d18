package election_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/electord/electord/election/algorithms"
)

// forbidden imports: clocks, threads, sockets, locks, ambient randomness and I/O.
var forbidden = map[string]string{
	"time": "clock", "sync": "locks", "sync/atomic": "locks", "net": "sockets", "net/http": "sockets",
	"os": "I/O", "math/rand": "ambient randomness", "math/rand/v2": "ambient randomness", "crypto/rand": "ambient randomness",
	"runtime": "scheduler", "unsafe": "unsafe", "log": "I/O", "io": "I/O",
}

// TestAlgorithmsArePure parses the algorithm packages and fails on a go
// statement, a forbidden import, or a channel operation.
func TestAlgorithmsArePure(t *testing.T) {
	checked := 0
	// The core, and each registered algorithm (its package dir is its name).
	for _, dir := range append([]string{".", "named"}, algorithms.Names()...) {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			checked++
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if why, bad := forbidden[p]; bad {
					t.Errorf("%s imports %q (%s)", fset.Position(imp.Pos()), p, why)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: go statement", fset.Position(n.Pos()))
				case *ast.SendStmt:
					t.Errorf("%s: channel send", fset.Position(n.Pos()))
				case *ast.ChanType:
					t.Errorf("%s: channel type", fset.Position(n.Pos()))
				case *ast.SelectStmt:
					t.Errorf("%s: select", fset.Position(n.Pos()))
				}
				return true
			})
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d files: the globs are wrong", checked)
	}
}
