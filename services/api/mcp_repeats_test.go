package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestMCPRefusesRepeatedHeaders attacks /mcp with a header mcpbus checks
// sent twice, the first value matching the body and the second another
// (what a proxy routing on the last value would see): each is a 400
// naming the header, nothing runs. Once each, the same requests work.
func TestMCPRefusesRepeatedHeaders(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	auth := "Bearer " + aliceKey
	call := modernBody(1, "tools/call", `"name":"demo_echo","arguments":{}`)
	modern := func(extra ...string) []string {
		return append([]string{"Authorization", auth, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "demo_echo"}, extra...)
	}
	if resp := postHeaders(t, e.base+"/mcp", call, true, modern()...); resp.StatusCode != http.StatusOK {
		t.Fatalf("the call with each header once: %d %v", resp.StatusCode, rpcBody(t, resp))
	}
	session, _ := rawInit(t, e.base, aliceKey, "2025-06-18")
	legacy := []string{"Authorization", auth, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"}
	if resp := postHeaders(t, e.base+"/mcp", listBody, true, legacy...); resp.StatusCode != http.StatusOK {
		t.Fatalf("the legacy list with each header once: %d %v", resp.StatusCode, rpcBody(t, resp))
	}
	for _, c := range []struct {
		header, body string
		hdr          []string
	}{
		{"Mcp-Method", call, modern("Mcp-Method", "tools/list")},
		{"Mcp-Protocol-Version", call, modern("Mcp-Protocol-Version", "2025-11-25")},
		{"Mcp-Name", call, modern("Mcp-Name", "demo_t0")},
		{"Mcp-Param-Region", call, modern("Mcp-Param-Region", "us-west1", "Mcp-Param-Region", "eu-north1")},
		{"Mcpbus-Thread-Id", call, modern("Mcpbus-Thread-Id", "a", "Mcpbus-Thread-Id", "b")},
		{"Authorization", call, modern("Authorization", "Bearer "+bobKey)},
		{"Mcp-Session-Id", listBody, append(legacy, "Mcp-Session-Id", "another")},
	} {
		resp := postHeaders(t, e.base+"/mcp", c.body, true, c.hdr...)
		body := rpcBody(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), c.header) {
			t.Errorf("%s twice: %d %v, want 400 naming the header", c.header, resp.StatusCode, body)
		}
	}
}

// TestMCPRefusesRepeatedMembers attacks /mcp with JSON-RPC bodies that
// repeat a member (encoding/json would keep the last; a proxy may read
// the first), in the message or in its params, also in another case
// (encoding/json matches names case-insensitively): each is a parse error
// naming the member.
func TestMCPRefusesRepeatedMembers(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	session, _ := rawInit(t, e.base, aliceKey, "2025-06-18")
	for _, c := range []struct{ member, body string }{
		{"method", `{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call","params":{"name":"demo_echo","arguments":{}}}`},
		{"Method", `{"jsonrpc":"2.0","id":3,"method":"tools/list","Method":"tools/call","params":{"name":"demo_echo","arguments":{}}}`},
		{"id", `{"jsonrpc":"2.0","id":3,"id":4,"method":"tools/list"}`},
		{"name", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo_t0","name":"demo_echo","arguments":{}}}`},
	} {
		resp := post(t, e.base+"/mcp", aliceKey, session, c.body, "Mcp-Protocol-Version", "2025-06-18")
		body := rpcBody(t, resp)
		errObj, _ := body["error"].(map[string]any)
		if resp.StatusCode != http.StatusBadRequest || errObj["code"] != float64(-32700) || !strings.Contains(fmt.Sprint(errObj["message"]), `"`+c.member+`"`) {
			t.Errorf("repeated %s: %d %v, want 400, a parse error naming it", c.member, resp.StatusCode, body)
		}
	}
}
