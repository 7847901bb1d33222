package demo_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

// conformanceURL serves the conformance fixture over streamable HTTP behind
// demo.ConformanceHTTP, as `demoserver -conformance -transport http` does.
func conformanceURL(t *testing.T) string {
	t.Helper()
	h := server.NewStreamableHTTPServer(demo.NewConformance(), server.WithStateful(true))
	ts := httptest.NewServer(demo.ConformanceHTTP(h))
	t.Cleanup(ts.Close)
	return ts.URL
}

// rpc is the decoded answer to one 2026-07-28 request.
type rpc struct {
	status int
	Result map[string]any `json:"result"`
	Error  *struct {
		Code int            `json:"code"`
		Data map[string]any `json:"data"`
	} `json:"error"`
}

// callModern sends a 2026-07-28 tools/call of name with the extra params
// (inputResponses, requestState) and the client capabilities caps.
func callModern(t *testing.T, url, name string, caps map[string]any, extra map[string]any) rpc {
	t.Helper()
	params := map[string]any{"name": name, "arguments": map[string]any{}, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out rpc
	raw := new(bytes.Buffer)
	_, _ = raw.ReadFrom(resp.Body)
	b := raw.Bytes()
	if i := bytes.Index(b, []byte("data: ")); i >= 0 { // an SSE response: its one message
		b = bytes.TrimSpace(bytes.SplitN(b[i+len("data: "):], []byte("\n"), 2)[0])
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v in %s", name, err, raw)
	}
	out.status = resp.StatusCode
	return out
}

// TestConformanceInputRequired: the fixture's multi-round-trip tools ask
// with an input_required result, complete once the retry carries the
// answers and the signed requestState, ask again for a missing answer,
// and refuse a tampered state with a JSON-RPC error.
func TestConformanceInputRequired(t *testing.T) {
	t.Parallel()
	url := conformanceURL(t)
	r1 := callModern(t, url, "test_input_required_result_request_state", map[string]any{"elicitation": map[string]any{}}, nil)
	state, _ := r1.Result["requestState"].(string)
	if r1.Result["resultType"] != "input_required" || state == "" || r1.Result["inputRequests"].(map[string]any)["confirm"] == nil {
		t.Fatalf("round 1: %+v", r1)
	}
	answer := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	r2 := callModern(t, url, "test_input_required_result_request_state", map[string]any{}, map[string]any{"inputResponses": answer, "requestState": state})
	if r2.Result["resultType"] != "complete" || !strings.Contains(jsonOf(r2.Result["content"]), "state-ok") {
		t.Errorf("round 2: %+v", r2)
	}
	if r := callModern(t, url, "test_input_required_result_request_state", map[string]any{}, map[string]any{"inputResponses": map[string]any{"other": answer["confirm"]}, "requestState": state}); r.Result["resultType"] != "input_required" {
		t.Errorf("a missing answer is asked for again: %+v", r)
	}
	if r := callModern(t, url, "test_input_required_result_tampered_state", map[string]any{}, map[string]any{"inputResponses": answer, "requestState": state + "-TAMPERED"}); r.Error == nil {
		t.Errorf("a tampered state is an error: %+v", r)
	}
}

// TestConformanceMissingCapability: test_missing_capability without the
// sampling capability is HTTP 400 with -32021 naming it in
// data.requiredCapabilities; with it, the tool asks for the sampling.
func TestConformanceMissingCapability(t *testing.T) {
	t.Parallel()
	url := conformanceURL(t)
	r := callModern(t, url, "test_missing_capability", map[string]any{}, nil)
	if r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32021 || r.Error.Data["requiredCapabilities"] == nil ||
		jsonOf(r.Error.Data["requiredCapabilities"]) != `{"sampling":{}}` {
		t.Errorf("without sampling: %+v", r)
	}
	if r := callModern(t, url, "test_missing_capability", map[string]any{"sampling": map[string]any{}}, nil); r.Result["resultType"] != "input_required" {
		t.Errorf("with sampling: %+v", r)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
