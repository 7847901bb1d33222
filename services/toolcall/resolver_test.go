package toolcall_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A call resolves its tool with one lookup of that tool on discovery's
// catalog, never by fetching the whole catalog, and the tool found is
// kept: a second call of it asks discovery nothing; another tool is one
// more lookup; an unknown name is not_found.
func TestResolutionLooksUpOneToolNotTheCatalog(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	for range 2 {
		if r := e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"one"}`)}); text(t, r) != "one" {
			t.Fatalf("fake_echo = %+v", r)
		}
	}
	if n, whole := e.catalogRequests.Load(), e.wholeCatalogRequests.Load(); n != 1 || whole != 0 {
		t.Errorf("two calls of one tool: %d catalog requests (%d for the whole catalog), want 1 lookup", n, whole)
	}
	if r := e.mustCall(t, bus.Call{Tool: "fake_whoami"}); r.Server != "fake" {
		t.Errorf("fake_whoami = %+v", r)
	}
	if _, err := e.call(t, bus.Call{Tool: "fake_nope"}); bus.AsError(err).Code != bus.CodeNotFound {
		t.Errorf("an unknown tool: %v, want not_found", err)
	}
	if n, whole := e.catalogRequests.Load(), e.wholeCatalogRequests.Load(); n != 3 || whole != 0 {
		t.Errorf("after two more tools: %d catalog requests (%d for the whole catalog), want 3 lookups", n, whole)
	}
}
