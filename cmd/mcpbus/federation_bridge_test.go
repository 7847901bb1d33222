package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// modernPromptGet posts a 2026-07-28 prompts/get (declaring elicitation)
// as key and returns the JSON-RPC result or error.
func modernPromptGet(t *testing.T, base, key string, params map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	return modernFed(t, base, key, "prompts/get", params["name"].(string), params)
}

// modernRead posts a 2026-07-28 resources/read (declaring elicitation).
func modernRead(t *testing.T, base, key string, params map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	return modernFed(t, base, key, "resources/read", params["uri"].(string), params)
}

// modernFed posts a 2026-07-28 request of method naming name (its
// Mcp-Name), declaring elicitation, as key and returns the JSON-RPC
// result or error.
func modernFed(t *testing.T, base, key, method, name string, params map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method,
		"Mcp-Name": name} {
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
// own input_required result, its requestState sealed by mcpbus; bob
// sending alice's sealed state back is refused; alice's retry with
// inputResponses (and the requestState she got) reaches the upstream,
// whose complete GetPromptResult comes back.
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
	state, _ := res["requestState"].(string)
	if state == "" || strings.Contains(state, "prompt-state") {
		t.Fatalf("round 1's requestState %q, want the upstream's sealed by mcpbus", state)
	}
	retry["requestState"] = state
	replayRefused(t, st.apiB, "prompts/get", name, retry)
	res, rerr = modernPromptGet(t, st.apiB, mcpAliceKey, retry)
	b, _ := json.Marshal(res)
	if rerr != nil || res["resultType"] != "complete" || !strings.Contains(string(b), "Use this context: from the test") {
		t.Fatalf("round 2 on the other replica: %s %v, want the complete prompt with the context", b, rerr)
	}
}

// TestResourcesReadInputRequiredIsBridged: an upstream's 2026-07-28
// multi-round-trip answer to resources/read (the fixture's
// test://input-required-resource, whose requestState it checks on the
// retry) reaches a 2026-07-28 client as its own input_required result,
// its requestState sealed by mcpbus (the upstream's is not shown); bob
// sending alice's sealed state back is refused, and so is alice's second
// use of it; alice's retry on the other replica reaches the upstream with
// the upstream's own state and the answer, and the complete contents come
// back with the visible URI.
func TestResourcesReadInputRequiredIsBridged(t *testing.T) {
	t.Parallel()
	st := startNotifyStack(t)
	uri := "mcpbus://fx/" + demo.InputRequiredResourceURI
	var res, rerr map[string]any
	testkit.Eventually(t, 90*time.Second, "the fixture's resource listed", func() bool {
		res, rerr = modernRead(t, st.apiA, mcpAliceKey, map[string]any{"uri": uri})
		return rerr == nil
	})
	reqs, _ := res["inputRequests"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || reqs["user_context"] == nil || state == "" {
		t.Fatalf("round 1: %v, want resultType input_required with the inputRequests user_context and a requestState", res)
	}
	if strings.Contains(state, "resource-state") {
		t.Errorf("the client sees the upstream's requestState %q, want it sealed", state)
	}
	retry := map[string]any{"uri": uri, "requestState": state, "inputResponses": map[string]any{
		"user_context": map[string]any{"action": "accept", "content": map[string]any{"context": "from the test"}}}}
	if msg := replayRefused(t, st.apiB, "resources/read", uri, retry); strings.Contains(msg, demo.InputRequiredResourceURI) {
		t.Errorf("the refusal quotes the URI: %q", msg)
	}
	res, rerr = modernRead(t, st.apiB, mcpAliceKey, retry)
	b, _ := json.Marshal(res)
	if rerr != nil || res["resultType"] == "input_required" || !strings.Contains(string(b), "Resource read with the context: from the test") ||
		!strings.Contains(string(b), `"uri":"`+uri+`"`) {
		t.Fatalf("round 2 on the other replica: %s %v, want the contents with the context and the visible URI", b, rerr)
	}
	if _, rerr = modernRead(t, st.apiA, mcpAliceKey, retry); rerr == nil || rerr["code"] != float64(-32602) {
		t.Errorf("alice's second use of the state: %v, want -32602", rerr)
	}
}

// replayRefused: bob sending back alice's sealed requestState (retry) for
// method and name is refused with -32602 whose message (returned) does not
// quote the state.
func replayRefused(t *testing.T, base, method, name string, retry map[string]any) string {
	t.Helper()
	bobs := map[string]any{}
	for k, v := range retry {
		bobs[k] = v
	}
	res, rerr := modernFed(t, base, mcpBobKey, method, name, bobs)
	if rerr == nil || rerr["code"] != float64(-32602) {
		t.Fatalf("bob replaying alice's %s requestState: %v %v, want -32602", method, res, rerr)
	}
	msg, _ := rerr["message"].(string)
	if strings.Contains(msg, retry["requestState"].(string)) || !strings.HasPrefix(msg, method+" params: requestState") {
		t.Errorf("the refusal %q quotes the state, or does not name %s's requestState", msg, method)
	}
	return msg
}
