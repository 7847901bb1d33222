package api_test

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestMCPCallPathFacts reads the front half of a /mcp tools/call off the
// goroutine that serves it, while toolcall (here its responder) holds the
// call, in both eras: the functions and files of this repository it
// crosses from the HTTP handler to the bus request (docs/architecture.md,
// "The front of a call"; go test -v -run TestMCPCallPathFacts
// ./services/api). The transport (mcphttp) enters the protocol package
// (mcpserver) once, at the era's Dispatch, and the protocol package never
// calls back into the transport's code: the stack goes mcphttp →
// mcpserver → bus, each package entered once. The call is served on one
// goroutine (the modern era's cancellation does not need another).
func TestMCPCallPathFacts(t *testing.T) {
	t.Parallel()
	hold, release := make(chan struct{}, 1), make(chan struct{})
	e := startWith(t, options{keys: testKeys(), tools: mcpTools(), beforeCall: func() {
		hold <- struct{}{}
		<-release
	}})
	session, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	for _, c := range []struct {
		era        string
		session    string
		body       string
		hdr        []string
		entry, way string
	}{
		{"2025-11-25", session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo_echo","arguments":{"message":"hi"}}}`,
			[]string{"Mcp-Protocol-Version", "2025-11-25"}, "mcpserver.(*Legacy).Dispatch", "mcpserver.(*Server).legacyCall"},
		{"2026-07-28", "", modernBody(4, "tools/call", `"name":"demo_echo","arguments":{"message":"hi"}`),
			modernHeaders("tools/call", "demo_echo"), "mcpserver.(*Modern).Dispatch", "mcpserver.(*Modern).callTool"},
	} {
		done := make(chan string, 1)
		go func() {
			resp := post(t, e.base+"/mcp", aliceKey, c.session, c.body, c.hdr...)
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			done <- fmt.Sprint(resp.StatusCode, " ", string(b))
		}()
		testkit.Receive(t, 20*time.Second, "the call to reach toolcall", hold)
		stack := testkit.CallStack("mcphttp.(*Handler).ServeHTTP(", "bus.request")
		close(release)
		if got := testkit.Receive(t, 20*time.Second, "the reply", done); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"text":"alice"`) {
			t.Fatalf("%s: the call's reply: %s", c.era, got)
		}
		release = make(chan struct{})
		if len(stack) == 0 {
			t.Fatalf("%s: no goroutine carries the call from mcphttp's ServeHTTP to the bus request", c.era)
		}
		var fns, pkgs []string
		files := map[string]bool{}
		for _, f := range stack {
			fns = append(fns, f.Func)
			files[f.File] = true
			pkg, _, _ := strings.Cut(f.Func[strings.LastIndex(f.Func, "/")+1:], ".")
			if len(pkgs) == 0 || pkgs[len(pkgs)-1] != pkg {
				pkgs = append(pkgs, pkg)
			}
		}
		t.Logf("%s: %d functions in %d files, packages in order %v:\n  %s", c.era, len(stack), len(files), pkgs, strings.Join(fns, "\n  "))
		for _, want := range []string{c.entry, c.way, "mcpserver.(*Server).callDecoded", "mcpserver.(*Server).requestCall"} {
			if !slices.ContainsFunc(fns, func(fn string) bool { return strings.HasSuffix(fn, want) }) {
				t.Errorf("%s: the call's stack lacks %s", c.era, want)
			}
		}
		// Each package entered once: no ping-pong between the transport
		// and the protocol package.
		seen := map[string]bool{}
		for _, p := range pkgs {
			if seen[p] {
				t.Errorf("%s: the stack re-enters package %s (%v)", c.era, p, pkgs)
			}
			seen[p] = true
		}
	}
}
