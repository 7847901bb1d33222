package toolcall_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The era discovery knows (the catalog entry's server_era) is where
// toolcall's connections start: a legacy server named so is never probed
// with server/discover, in any thread's process, while the same server
// without it is probed once per process.
func TestDiscoveryEraSkipsTheProbe(t *testing.T) {
	t.Parallel()
	// Distinct command lines: the era cache is per origin (command line
	// and directory).
	seeded, seededRec := stdioServer(t, `"args": ["seeded"]`)
	probed, probedRec := stdioServer(t, `"args": ["probed"]`)
	catalog := append(tools("seeded", "echo"), tools("probed", "echo")...)
	for i := range catalog {
		if catalog[i].Server == "seeded" {
			catalog[i].ServerEra = "legacy"
		}
	}
	e := start(t, cfgOf(map[string]string{"seeded": seeded, "probed": probed}, ""), catalog)
	for _, thread := range []string{"t1", "t2"} {
		for _, server := range []string{"seeded", "probed"} {
			if got := text(t, e.mustCall(t, bus.Call{Tool: server + "_echo", Arguments: json.RawMessage(`{"message":"hi"}`), UserID: "alice", ThreadID: thread})); got != "hi" {
				t.Fatalf("%s echo in %s = %q", server, thread, got)
			}
		}
	}
	if rs := readRecords(t, seededRec); countMethod(rs, "server/discover") != 0 || countMethod(rs, "initialize") != 2 {
		t.Errorf("seeded legacy server: %d server/discover, %d initialize; want 0 and 2",
			countMethod(rs, "server/discover"), countMethod(rs, "initialize"))
	}
	if rs := readRecords(t, probedRec); countMethod(rs, "server/discover") == 0 {
		t.Error("the server without a known era was not probed (the check above could not fail)")
	}
}

// The bridging fields are caller-controlled data forwarded upstream: a
// capability that is not a JSON object, one too large, input responses
// that are not an object, a request state too large or an ask inbox that
// is another subject are refused before anything runs.
func TestBridgingFieldsAreValidated(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	big := `{"x":"` + strings.Repeat("a", bus.MaxCapabilityBytes) + `"}`
	for name, req := range map[string]bus.Call{
		"capability not an object": {ClientCapabilities: &bus.ClientCapabilities{Elicitation: json.RawMessage(`"yes"`)}},
		"capability too large":     {ClientCapabilities: &bus.ClientCapabilities{Sampling: json.RawMessage(big)}},
		"responses not an object":  {Input: &bus.CallInput{InputResponses: json.RawMessage(`[1]`)}},
		"state too large":          {Input: &bus.CallInput{RequestState: strings.Repeat("s", bus.MaxRequestStateBytes+1)}},
		"ask inbox not one":        {AskInbox: "mcpbus.tools.call"},
	} {
		req.Tool, req.Arguments = "fake_echo", json.RawMessage(`{"message":"x"}`)
		if _, err := e.call(t, req); !errors.Is(err, bus.ErrInvalidRequest) {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	if n := countMethod(readRecords(t, rec), "tools/call"); n != 0 {
		t.Errorf("%d tools/call reached the upstream", n)
	}
}
