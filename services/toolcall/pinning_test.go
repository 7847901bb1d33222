package toolcall_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// TestStaleDigestIsRefusedBeforeTheUpstream: an agent worker's call over
// NATS carrying the digest it listed is refused with tool_changed once the
// catalog serves another definition of the tool, and the upstream never
// sees it; the current digest, or none, runs the call.
func TestStaleDigestIsRefusedBeforeTheUpstream(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	cat := fakeTools("fake")
	for i := range cat {
		cat[i].Digest = "current-" + cat[i].OriginalName
	}
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), cat)

	_, err := e.call(t, bus.Call{Tool: "fake_echo", Digest: "listed-before", UserID: "agent", Arguments: json.RawMessage(`{"message":"hi"}`)})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeToolChanged || be.Details["digest"] != "current-echo" {
		t.Fatalf("a stale digest: want tool_changed naming the current digest, got %v", err)
	}
	if n := countMethod(readRecords(t, rec), "tools/call"); n != 0 {
		t.Fatalf("the refused call reached the upstream (%d tools/call)", n)
	}
	for _, digest := range []string{"current-echo", ""} {
		r := e.mustCall(t, bus.Call{Tool: "fake_echo", Digest: digest, UserID: "agent", Arguments: json.RawMessage(`{"message":"hi"}`)})
		if text(t, r) != "hi" {
			t.Fatalf("digest %q: %+v", digest, r)
		}
	}
}
