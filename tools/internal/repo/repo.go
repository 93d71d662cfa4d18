// Package repo finds the electord repository that the tools run from and
// builds the product's binaries from it.
//
// A product binary is always built in the product module (the repository's
// root), never through the tools module: the tools module requires more
// modules (etcd's client among them), and minimal version selection could
// then build electord against other versions than the ones it ships with.
package repo

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ProductModule is the module path of the product.
const ProductModule = "github.com/electord/electord"

// Root returns the repository's root: the nearest directory at or above the
// working directory whose go.mod declares ProductModule.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == ProductModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no directory at or above the working directory has a go.mod for module %s", ProductModule)
		}
		dir = parent
	}
}

// modulePath returns the module path a go.mod declares, or "".
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Go returns the go command of the toolchain running this program, or the
// one on PATH.
func Go() string {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err == nil {
		return gobin
	}
	return "go"
}

// Build builds the packages pkgs (paths relative to the repository's root,
// such as "./cmd/electord") into out: a file for one package, a directory
// ending in a separator for several. static builds with CGO_ENABLED=0, for
// a FROM scratch image. The go command's output goes to stderr.
func Build(out string, static bool, pkgs ...string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	return build(root, out, static, pkgs...)
}

// BuildTool builds a package of the tools module (a path relative to its
// root, such as "./cmd/pause") into out.
func BuildTool(out string, static bool, pkg string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	return build(filepath.Join(root, "tools"), out, static, pkg)
}

func build(dir, out string, static bool, pkgs ...string) error {
	if len(pkgs) == 0 {
		return errors.New("repo: no package to build")
	}
	cmd := exec.Command(Go(), append([]string{"build", "-o", out}, pkgs...)...)
	cmd.Dir = dir
	if static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", strings.Join(pkgs, " "), dir, err, b)
	}
	return nil
}
