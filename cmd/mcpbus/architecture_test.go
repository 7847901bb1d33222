package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// packages use the pkg/store interfaces; only the composition root
// (cmd/mcpbus) opens a backend. Any other service links no part of
// pkg/store.
var storeServices = map[string]bool{"tokens": true, "toolcall": true, "taskpoller": true, "api": true, "discovery": true}

// backendPackages are what only the composition root may link: the
// drivers, the backend packages and bootstrap.
var backendPackages = []string{
	"github.com/jackc/pgx", "modernc.org/sqlite",
	modulePrefix + "pkg/store/backends", modulePrefix + "pkg/store/postgres", modulePrefix + "pkg/store/sqlite",
	modulePrefix + "pkg/store/memory", modulePrefix + "pkg/bootstrap",
}

// pkgLayers orders pkg's packages from the most basic up: a package
// imports only packages of layers below its own, so that the foundations
// (redaction, tracing, the store's interfaces) know nothing of the bus,
// the bus nothing of configuration, configuration nothing of what is built
// on it, and only the composition helpers (bootstrap, testkit) see
// everything. A new package takes its place here.
var pkgLayers = [][]string{
	// Foundations: no other pkg package.
	{"pkg/redact", "pkg/orderedjson", "pkg/egress", "pkg/flight", "pkg/headers", "pkg/healthhttp", "pkg/inflight",
		"pkg/presence", "pkg/replica", "pkg/tracing", "pkg/tracing/tracingtest", "pkg/observability/metrics",
		"pkg/observability/metrics/metricstest", "pkg/store", "pkg/quota"},
	// The bus vocabulary, logging, the store's shared SQL and test kits.
	{"pkg/bus", "pkg/observability", "pkg/store/sqlstore", "pkg/store/memory", "pkg/store/storetest"},
	// The transports built on the bus, the pinning engine and the SQL
	// dialects.
	{"pkg/httpguard", "pkg/kvcache", "pkg/microsvc", "pkg/mcpclient", "pkg/mcpauth", "pkg/pinning", "pkg/store/postgres", "pkg/store/sqlite"},
	// Configuration: parsing and validation.
	{"pkg/config"},
	// The domain: what the services share.
	{"pkg/crypto", "pkg/audit", "pkg/guardrails", "pkg/interceptors", "pkg/launchpolicy", "pkg/sharedstate",
		"pkg/tasks", "pkg/tokenclient", "pkg/store/backends", "pkg/virtual"},
	// The MCP protocol server and the audit table over the store.
	{"pkg/mcpserver", "pkg/audit/audittable"},
	// Composition: the runtime of a service process and the test stacks.
	{"pkg/bootstrap", "pkg/testkit"},
}

// pkgLayer returns the layer of a pkg package (-1 when it has none).
func pkgLayer(path string) int {
	rel := strings.TrimPrefix(path, modulePrefix)
	for i, layer := range pkgLayers {
		if slices.Contains(layer, rel) {
			return i
		}
	}
	return -1
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
			out = append(out, layerViolations(p)...)
		}
		if svc == "" {
			continue
		}
		if p.Name == "main" {
			add(p, "a service has no main of its own: `mcpbus serve "+svc+"` (cmd/mcpbus/internal/wiring) is the one composition root")
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
			case anyUnder(d, backendPackages):
				add(p, "service package links "+d+" (only the composition root wires backends and bootstrap)")
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

// layerViolations applies pkgLayers to one pkg package.
func layerViolations(p listedPackage) []string {
	own := pkgLayer(p.ImportPath)
	if own < 0 {
		return []string{p.ImportPath + ": pkg package in no layer (add it to pkgLayers in cmd/mcpbus/architecture_test.go)"}
	}
	var out []string
	for _, imp := range p.Imports {
		if !under(imp, modulePrefix+"pkg") {
			continue
		}
		if l := pkgLayer(imp); l >= own {
			out = append(out, fmt.Sprintf("%s: layer %d imports %s of layer %d (a pkg package imports only lower layers)", p.ImportPath, own, imp, l))
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
// a database links any of pkg/store), when a service has a main of its own,
// when pkg imports a service, when a pkg package imports one of its own
// layer or above (pkgLayers), or when a package has no doc comment.
func TestArchitecture(t *testing.T) {
	t.Parallel()
	pkgs := workspacePackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
	}
	for _, want := range []string{modulePrefix + "services/discovery", modulePrefix + "pkg/store", modulePrefix + "pkg/bus", modulePrefix + "cmd/mcpbus"} {
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
		{ImportPath: modulePrefix + "pkg/redact", Name: "redact", Doc: doc, Imports: []string{modulePrefix + "pkg/bus"}},
		{ImportPath: modulePrefix + "pkg/config", Name: "config", Doc: doc, Imports: []string{modulePrefix + "pkg/bootstrap"}},
		// Allowed: a stored service uses the interfaces, pkg links a lower
		// layer of pkg, the composition root links backends.
		{ImportPath: modulePrefix + "services/taskpoller", Name: "taskpoller", Doc: doc, Deps: []string{modulePrefix + "pkg/store"}},
		{ImportPath: modulePrefix + "pkg/bootstrap", Name: "bootstrap", Doc: doc, Imports: []string{modulePrefix + "pkg/bus"}, Deps: []string{modulePrefix + "pkg/bus"}},
		{ImportPath: modulePrefix + "cmd/mcpbus/internal/wiring", Name: "wiring", Doc: doc, Deps: []string{modulePrefix + "pkg/store/backends", "modernc.org/sqlite"}},
	}
	got := strings.Join(architectureViolations(pkgs), "\n")
	for _, want := range []string{
		"services/api: service api imports service toolcall",
		"services/toolcall: service package links " + modulePrefix + "pkg/store/backends",
		"services/tokens: service package links " + modulePrefix + "pkg/bootstrap",
		"services/nodb/cmd/mcpbus-nodb: service nodb has no database but links the driver github.com/jackc/pgx/v5",
		"services/nodb/cmd/mcpbus-nodb: a service has no main of its own",
		"services/nodb: service nodb has no database but links " + modulePrefix + "pkg/store",
		"pkg/bus: pkg imports the service package",
		"pkg/nodoc: has no package doc comment",
		"pkg/nodoc: pkg package in no layer",
		"pkg/redact: layer 0 imports " + modulePrefix + "pkg/bus of layer 1",
		"pkg/config: layer 3 imports " + modulePrefix + "pkg/bootstrap of layer 6",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations lack %q:\n%s", want, got)
		}
	}
	for _, allowed := range []string{"cmd/mcpbus/internal/wiring:", "services/taskpoller:", "pkg/bootstrap:"} {
		if strings.Contains(got, allowed) {
			t.Errorf("an allowed package is reported (%s):\n%s", allowed, got)
		}
	}
	if n := len(architectureViolations(pkgs[9:])); n != 0 {
		t.Errorf("the allowed packages give %d violations", n)
	}
}
