package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// modernPromptGet posts a 2026-07-28 prompts/get (declaring elicitation)
// as key and returns the JSON-RPC result or error.
func modernPromptGet(t *testing.T, base, key string, params map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": params})
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get",
		"Mcp-Name": params["name"].(string)} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id":1`) {
				_ = json.Unmarshal([]byte(data), &out)
			}
		}
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&out)
	}
	return out.Result, out.Error
}

// TestPromptsGetInputRequiredIsBridged: an upstream's 2026-07-28
// multi-round-trip answer to prompts/get (the conformance fixture's
// test_input_required_result_prompt) reaches a 2026-07-28 client as its
// own input_required result; the client's retry with inputResponses (and
// the requestState it got) reaches the upstream, whose complete
// GetPromptResult comes back.
func TestPromptsGetInputRequiredIsBridged(t *testing.T) {
	t.Parallel()
	st := startNotifyStack(t)
	name := "fx_test_input_required_result_prompt"
	var res, rerr map[string]any
	testkit.Eventually(t, 90*time.Second, "the fixture's prompt listed", func() bool {
		res, rerr = modernPromptGet(t, st.apiA, mcpAliceKey, map[string]any{"name": name})
		return rerr == nil
	})
	reqs, _ := res["inputRequests"].(map[string]any)
	if res["resultType"] != "input_required" || reqs["user_context"] == nil {
		t.Fatalf("round 1: %v, want resultType input_required with the inputRequests user_context", res)
	}
	retry := map[string]any{"name": name, "inputResponses": map[string]any{
		"user_context": map[string]any{"action": "accept", "content": map[string]any{"context": "from the test"}}}}
	if state, ok := res["requestState"].(string); ok {
		retry["requestState"] = state
	}
	res, rerr = modernPromptGet(t, st.apiB, mcpAliceKey, retry)
	b, _ := json.Marshal(res)
	if rerr != nil || res["resultType"] != "complete" || !strings.Contains(string(b), "Use this context: from the test") {
		t.Fatalf("round 2 on the other replica: %s %v, want the complete prompt with the context", b, rerr)
	}
}
