package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modulePrefix = "github.com/mcpbus/mcpbus/"

// storeServices are the services with a database: tokens (refresh-token
// chains), toolcall (task rows on submit), taskpoller (durable tasks), api
// (personal connections, the pin queue) and discovery (tool pins). Their
// packages use the pkg/store interfaces; only their mains open a backend.
// Any other service links no part of pkg/store.
var storeServices = map[string]bool{"tokens": true, "toolcall": true, "taskpoller": true, "api": true, "discovery": true}

// backendPackages are what only a main may link: the drivers, the backend
// packages and bootstrap (main's wiring).
var backendPackages = []string{
	"github.com/jackc/pgx", "modernc.org/sqlite",
	modulePrefix + "pkg/store/backends", modulePrefix + "pkg/store/postgres", modulePrefix + "pkg/store/sqlite",
	modulePrefix + "pkg/store/memory", modulePrefix + "pkg/bootstrap",
}

// listedPackage is the part of `go list -json` the rules read.
type listedPackage struct {
	ImportPath string
	Name       string
	Doc        string
	Imports    []string
	Deps       []string
}

// serviceOf returns the service a package belongs to ("" for none).
func serviceOf(path string) string {
	rest, ok := strings.CutPrefix(path, modulePrefix+"services/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// under reports whether path is pkg or one of its sub-packages.
func under(path, pkg string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }

func anyUnder(path string, pkgs []string) bool {
	return slices.ContainsFunc(pkgs, func(p string) bool { return under(path, p) })
}

// architectureViolations applies the layout rules (DESIGN §2) to the
// workspace's packages.
func architectureViolations(pkgs []listedPackage) []string {
	var out []string
	add := func(p listedPackage, msg string) { out = append(out, p.ImportPath+": "+msg) }
	for _, p := range pkgs {
		if p.Doc == "" {
			add(p, "has no package doc comment")
		}
		svc := serviceOf(p.ImportPath)
		if under(p.ImportPath, modulePrefix+"pkg") {
			for _, d := range p.Deps {
				if serviceOf(d) != "" {
					add(p, "pkg imports the service package "+d)
				}
			}
		}
		if svc == "" {
			continue
		}
		for _, imp := range p.Imports {
			if other := serviceOf(imp); other != "" && other != svc {
				add(p, "service "+svc+" imports service "+other+" ("+imp+")")
			}
		}
		for _, d := range p.Deps {
			switch {
			case !storeServices[svc] && under(d, modulePrefix+"pkg/store"):
				add(p, "service "+svc+" has no database but links "+d)
			case p.Name != "main" && anyUnder(d, backendPackages):
				add(p, "service package links "+d+" (only a main wires backends and bootstrap)")
			}
		}
		if !storeServices[svc] {
			for _, d := range p.Deps {
				if anyUnder(d, backendPackages[:2]) {
					add(p, "service "+svc+" has no database but links the driver "+d)
				}
			}
		}
	}
	return out
}

// workspacePackages lists every package of the workspace's modules with
// its imports and dependencies.
func workspacePackages(t *testing.T) []listedPackage {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	var patterns []string
	for dir := range strings.FieldsSeq(string(run("list", "-m", "-f", "{{.Dir}}"))) {
		patterns = append(patterns, dir+"/...")
	}
	data := run(append([]string{"list", "-json=ImportPath,Name,Doc,Imports,Deps"}, patterns...)...)
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestArchitecture fails when a service imports another service, when a
// service package links a store backend or bootstrap (or a service without
// a database links any of pkg/store, its main included), when pkg imports a
// service, or when a package has no doc comment.
func TestArchitecture(t *testing.T) {
	t.Parallel()
	pkgs := workspacePackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
	}
	for _, want := range []string{modulePrefix + "services/discovery", modulePrefix + "services/discovery/cmd/mcpbus-discovery", modulePrefix + "pkg/store", modulePrefix + "cmd/mcpbus"} {
		if !seen[want] {
			t.Fatalf("go list did not list %s (of %d packages)", want, len(pkgs))
		}
	}
	for _, v := range architectureViolations(pkgs) {
		t.Error(v)
	}
}

// TestArchitectureRulesCatchViolations feeds the rules one package per
// violation and requires each to be reported.
func TestArchitectureRulesCatchViolations(t *testing.T) {
	t.Parallel()
	doc := "Package x is a test."
	pkgs := []listedPackage{
		{ImportPath: modulePrefix + "services/api", Name: "api", Doc: doc, Imports: []string{modulePrefix + "services/toolcall"}},
		{ImportPath: modulePrefix + "services/toolcall", Name: "toolcall", Doc: doc, Deps: []string{modulePrefix + "pkg/store/backends"}},
		{ImportPath: modulePrefix + "services/tokens", Name: "tokens", Doc: doc, Deps: []string{modulePrefix + "pkg/bootstrap"}},
		// nodb stands for a service without a database.
		{ImportPath: modulePrefix + "services/nodb/cmd/mcpbus-nodb", Name: "main", Doc: doc, Deps: []string{"github.com/jackc/pgx/v5"}},
		{ImportPath: modulePrefix + "services/nodb", Name: "nodb", Doc: doc, Deps: []string{modulePrefix + "pkg/store"}},
		{ImportPath: modulePrefix + "pkg/bus", Name: "bus", Doc: doc, Deps: []string{modulePrefix + "services/api/internal/mcphttp"}},
		{ImportPath: modulePrefix + "pkg/nodoc", Name: "nodoc"},
		// Allowed: a stored service's main links a backend, a stored
		// service uses the interfaces, pkg links pkg.
		{ImportPath: modulePrefix + "services/tokens/cmd/mcpbus-tokens", Name: "main", Doc: doc, Deps: []string{modulePrefix + "pkg/store/backends", "modernc.org/sqlite"}},
		{ImportPath: modulePrefix + "services/taskpoller", Name: "taskpoller", Doc: doc, Deps: []string{modulePrefix + "pkg/store"}},
		{ImportPath: modulePrefix + "pkg/bootstrap", Name: "bootstrap", Doc: doc, Deps: []string{modulePrefix + "pkg/bus"}},
	}
	got := strings.Join(architectureViolations(pkgs), "\n")
	for _, want := range []string{
		"services/api: service api imports service toolcall",
		"services/toolcall: service package links " + modulePrefix + "pkg/store/backends",
		"services/tokens: service package links " + modulePrefix + "pkg/bootstrap",
		"services/nodb/cmd/mcpbus-nodb: service nodb has no database but links the driver github.com/jackc/pgx/v5",
		"services/nodb: service nodb has no database but links " + modulePrefix + "pkg/store",
		"pkg/bus: pkg imports the service package",
		"pkg/nodoc: has no package doc comment",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations lack %q:\n%s", want, got)
		}
	}
	for _, allowed := range []string{"services/tokens/cmd/mcpbus-tokens", "services/taskpoller:", "pkg/bootstrap:"} {
		if strings.Contains(got, allowed) {
			t.Errorf("an allowed package is reported (%s):\n%s", allowed, got)
		}
	}
	if n := len(architectureViolations(pkgs[7:])); n != 0 {
		t.Errorf("the allowed packages give %d violations", n)
	}
}
