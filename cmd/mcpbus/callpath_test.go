package main_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// contextKeyAllowed lists, per package of the call path, the context
// keys it may set with context.WithValue: request-scoped plumbing that is
// not call data. pkg/mcpclient's exchangeKey hands its own hooks inside
// mcp-go's transports (the HTTP header func, the response limiter, the log
// router), which mcp-go gives only the request's context, what they need
// of one request; it is built from explicit parameters (CallOptions) and
// never read from a caller's context. backgroundKey marks the requests of
// the connection's own listening stream. Everything of a call travels in
// bus.Call, toolcall's upcall and mcpclient.CallOptions.
//
// On the api side (REST, /mcp and /sse, the protocol server) the virtual
// server is a parameter and an Exchange field. bus.WithRequestID, which
// sets the bus request's Mcpbus-Request-Id header the way a trace context
// is carried, is still allowed there (counted as a key of its own).
var contextKeyAllowed = map[string][]string{
	"services/toolcall":             nil,
	"pkg/mcpclient":                 {"exchangeKey", "backgroundKey"},
	"services/api":                  {"bus.WithRequestID"},
	"services/api/internal/mcphttp": nil,
	"pkg/mcpserver":                 {"bus.WithRequestID"},
}

// contextValueKeys lists the key of every context.WithValue call in src
// (the key's type name, or its expression when it is not a composite
// literal).
func contextValueKeys(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var keys []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if pkg.Name == "bus" && sel.Sel.Name == "WithRequestID" {
			keys = append(keys, fmt.Sprintf("%s:%d: bus.WithRequestID", filepath.Base(name), fset.Position(call.Pos()).Line))
			return true
		}
		if pkg.Name != "context" || sel.Sel.Name != "WithValue" || len(call.Args) != 3 {
			return true
		}
		key := fmt.Sprintf("%T", call.Args[1])
		if lit, ok := call.Args[1].(*ast.CompositeLit); ok {
			if id, ok := lit.Type.(*ast.Ident); ok {
				key = id.Name
			}
		}
		keys = append(keys, fmt.Sprintf("%s:%d: %s", filepath.Base(name), fset.Position(call.Pos()).Line, key))
		return true
	})
	return keys, nil
}

// contextKeyViolations is every context.WithValue of a package's non-test
// sources (dir) whose key is not in allowed.
func contextKeyViolations(t *testing.T, dir string, allowed []string) (violations, used []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		keys, err := contextValueKeys(fset, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			used = append(used, k)
			if !slices.Contains(allowed, k[strings.LastIndex(k, " ")+1:]) {
				violations = append(violations, k)
			}
		}
	}
	return violations, used
}

// TestNoCallDataInContextValues fails when services/toolcall or
// pkg/mcpclient puts a value in a context under a key outside
// contextKeyAllowed: a call's data is an explicit value (bus.Call,
// toolcall's upcall, mcpclient.CallOptions), never a context value. It
// logs the keys in use (go test -v -run TestNoCallDataInContextValues .).
func TestNoCallDataInContextValues(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	for pkg, allowed := range contextKeyAllowed {
		violations, used := contextKeyViolations(t, filepath.Join(root, pkg), allowed)
		t.Logf("%s: %d context.WithValue calls, %d with call data: %v", pkg, len(used), len(violations), used)
		for _, v := range violations {
			t.Errorf("%s: %s is a context value outside the allow list (carry it in bus.Call, the upcall or mcpclient.CallOptions)", pkg, v)
		}
	}
}

// TestNoCallDataInContextValuesCatchesAKey feeds the check a file that
// carries a call's note in its context and requires it to be reported,
// and an allowed key not to be.
func TestNoCallDataInContextValuesCatchesAKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `package x

import "context"

type callNoteKey struct{}
type exchangeKey struct{}

func f(ctx context.Context) (context.Context, context.Context) {
	return context.WithValue(ctx, callNoteKey{}, 1), context.WithValue(ctx, exchangeKey{}, 2)
}
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	violations, used := contextKeyViolations(t, dir, contextKeyAllowed["pkg/mcpclient"])
	if len(used) != 2 || len(violations) != 1 || !strings.HasSuffix(violations[0], "callNoteKey") {
		t.Errorf("violations %q of %q, want the callNoteKey one alone", violations, used)
	}
}
