package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// modernClient is mcp-go's streamable HTTP client with default settings
// (it probes server/discover and stays on 2026-07-28 when that works),
// connected.
func modernClient(t *testing.T, url, key string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := c.Initialize(context.Background(), mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "modern", Version: "1"}}})
	if err != nil {
		t.Fatalf("initialize (discover): %v", err)
	}
	if res.ProtocolVersion != mcp.ProtocolVersion20260728 || c.GetSessionId() != "" {
		t.Fatalf("the default client did not settle on the modern era: %q, session %q", res.ProtocolVersion, c.GetSessionId())
	}
	return c
}

// modernBody is a 2026-07-28 request: params plus the required _meta.
func modernBody(id int, method, params string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params != "" {
		meta = params + "," + meta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, meta)
}

// modernHeaders are the mirrored headers of a request for method (and the
// tool name of a tools/call).
func modernHeaders(method, name string) []string {
	h := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// TestMCPModernEraWithTheDefaultClient: mcp-go's default client speaks
// 2026-07-28 to /mcp: discover gives the routing hints, capabilities and
// server info without a session; tools/list pages carry the caching hints
// (private: the catalog is the caller's); calls work; alice's and bob's
// catalogs are their own; the legacy methods are not part of the era.
func TestMCPModernEraWithTheDefaultClient(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	ctx := context.Background()
	alice := modernClient(t, e.base+"/mcp", aliceKey)
	disc, err := alice.Discover(ctx, mcp.DiscoverRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if disc.Instructions != "<mcp_routing_hints>for alice</mcp_routing_hints>" || disc.Capabilities.Tools == nil || !disc.Capabilities.Tools.ListChanged {
		t.Errorf("discover: %+v", disc)
	}
	if info := disc.GetResultMeta().ServerInfo(); info == nil || info.Name != "mcpbus" {
		t.Errorf("discover server info: %+v", info)
	}
	if fmt.Sprint(disc.SupportedVersions) != "[2026-07-28 2025-11-25 2025-06-18 2025-03-26 2024-11-05]" {
		t.Errorf("supported versions %v", disc.SupportedVersions)
	}
	if disc.CacheScope != mcp.CacheScopePrivate || disc.TTLMs == nil || *disc.TTLMs != 60000 {
		t.Errorf("discover caching hints: %v %v", disc.CacheScope, disc.TTLMs)
	}
	page, err := alice.ListToolsByPage(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tools) != 2 || page.NextCursor == "" || page.CacheScope != mcp.CacheScopePrivate || page.TTLMs == nil || *page.TTLMs != 60000 {
		t.Fatalf("first page: %d tools, cursor %q, scope %q, ttl %v", len(page.Tools), page.NextCursor, page.CacheScope, page.TTLMs)
	}
	all, err := alice.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(all.Tools) != 6 {
		t.Fatalf("tools/list: %v %v", all, err)
	}
	var call mcp.CallToolRequest
	call.Params.Name = "demo_echo"
	call.Params.Arguments = map[string]any{"x": "y"}
	res, err := alice.CallTool(ctx, call)
	if err != nil || res.IsError || textOf(t, res) != "alice" {
		t.Fatalf("call: %+v %v", res, err)
	}
	bob := modernClient(t, e.base+"/mcp", bobKey)
	if res, err := bob.CallTool(ctx, call); err != nil || textOf(t, res) != "bob" {
		t.Errorf("bob's call: %+v %v", res, err)
	}
	if d, err := bob.Discover(ctx, mcp.DiscoverRequest{}); err != nil || d.Instructions != "<mcp_routing_hints>for bob</mcp_routing_hints>" {
		t.Errorf("bob's discover: %+v %v", d, err)
	}
	// A failed request (resources/list: this stack runs no discovery to
	// answer mcpbus.resources.list) costs a modern client nothing: it
	// keeps calling. (An unknown method is a 404 with -32601,
	// TestMCPModernEraValidatesHeaders; mcp-go reads any 404 as an ended
	// session.)
	if _, err := alice.ListResources(ctx, mcp.ListResourcesRequest{}); err == nil {
		t.Error("resources/list answered")
	}
	if res, err := alice.CallTool(ctx, call); err != nil || textOf(t, res) != "alice" {
		t.Errorf("a call after the 404: %+v %v", res, err)
	}
}

// TestMCPModernEraValidatesHeaders: the mirrored headers must be there and
// match the body (400, -32020, nothing run); an unsupported version is a
// 400 -32022 listing the supported ones; required _meta fields missing are
// a 400 -32602; an unknown method a 404 -32601; no Mcp-Session-Id is ever
// issued; a valid raw request carries resultType and the caching hints.
func TestMCPModernEraValidatesHeaders(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	call := modernBody(1, "tools/call", `"name":"demo_echo","arguments":{}`)
	errorOf := func(resp *http.Response) (int, float64, map[string]any) {
		t.Helper()
		body := rpcBody(t, resp)
		errObj, _ := body["error"].(map[string]any)
		code, _ := errObj["code"].(float64)
		data, _ := errObj["data"].(map[string]any)
		return resp.StatusCode, code, data
	}
	for _, c := range []struct {
		name string
		body string
		hdr  []string
		code float64
	}{
		{"no Mcp-Name", call, modernHeaders("tools/call", ""), -32020},
		{"another Mcp-Name", call, modernHeaders("tools/call", "demo_t0"), -32020},
		{"another Mcp-Method", call, modernHeaders("tools/list", "demo_echo"), -32020},
		{"no Mcp-Method", call, []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Name", "demo_echo"}, -32020},
		{"no protocol header", call, []string{"Mcp-Method", "tools/call", "Mcp-Name", "demo_echo"}, -32020},
		{"protocol header differs from _meta", call, []string{"Mcp-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/call", "Mcp-Name", "demo_echo"}, -32020},
		{"base64 name of another tool", call, modernHeaders("tools/call", "=?base64?ZGVtb190MA==?="), -32020},
		{"unsupported version", strings.Replace(call, "2026-07-28", "2099-01-01", 1), []string{"Mcp-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/call", "Mcp-Name", "demo_echo"}, -32022},
		{"a modern header, no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, modernHeaders("tools/list", ""), -32602},
		{"no clientCapabilities", strings.Replace(call, `,"io.modelcontextprotocol/clientCapabilities":{}`, "", 1), modernHeaders("tools/call", "demo_echo"), -32602},
	} {
		status, code, data := errorOf(post(t, e.base+"/mcp", aliceKey, "", c.body, c.hdr...))
		if status != http.StatusBadRequest || code != c.code {
			t.Errorf("%s: %d %v, want 400 %v", c.name, status, code, c.code)
		}
		if c.code == -32022 && (fmt.Sprint(data["supported"]) != "[2026-07-28 2025-11-25 2025-06-18 2025-03-26 2024-11-05]" || data["requested"] != "2099-01-01") {
			t.Errorf("%s: data %v", c.name, data)
		}
	}
	if status, code, _ := errorOf(post(t, e.base+"/mcp", aliceKey, "", modernBody(2, "nope/list", ""), modernHeaders("nope/list", "")...)); status != http.StatusNotFound || code != -32601 {
		t.Errorf("unknown method: %d %v", status, code)
	}
	// initialize sent as a 2026-07-28 request is that revision's unknown
	// method (404 -32601); without the _meta version a modern header makes
	// it a malformed modern request (400 -32602), as for any method.
	if status, code, _ := errorOf(post(t, e.base+"/mcp", aliceKey, "", modernBody(3, "initialize", ""), modernHeaders("initialize", "")...)); status != http.StatusNotFound || code != -32601 {
		t.Errorf("a 2026-07-28 initialize: %d %v, want 404 -32601", status, code)
	}
	if status, code, _ := errorOf(post(t, e.base+"/mcp", aliceKey, "", fmt.Sprintf(initBody, "2026-07-28"), modernHeaders("initialize", "")...)); status != http.StatusBadRequest || code != -32602 {
		t.Errorf("initialize with a modern header and no _meta: %d %v, want 400 -32602", status, code)
	}

	// An unknown tool is invalid params, as the 2026-07-28 tools page says
	// (a protocol error, not an isError result), so HTTP 400.
	if status, code, data := errorOf(post(t, e.base+"/mcp", aliceKey, "", modernBody(4, "tools/call", `"name":"nope","arguments":{}`), modernHeaders("tools/call", "nope")...)); status != http.StatusBadRequest || code != -32602 || data["mcpbus_code"] != "not_found" {
		t.Errorf("an unknown tool: %d %v %v, want 400 -32602 not_found", status, code, data)
	}

	// The base64 form of the right name is the name.
	resp := post(t, e.base+"/mcp", aliceKey, "", call, modernHeaders("tools/call", "=?base64?ZGVtb19lY2hv?=")...)
	body := rpcBody(t, resp)
	res, _ := body["result"].(map[string]any)
	if resp.StatusCode != http.StatusOK || res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "alice") {
		t.Errorf("base64 Mcp-Name call: %d %v", resp.StatusCode, body)
	}
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("a modern response issued a session id")
	}
	// A session id sent along is ignored (no 404 for an unknown one).
	resp = post(t, e.base+"/mcp", aliceKey, "no-such-session", modernBody(3, "tools/list", ""), modernHeaders("tools/list", "")...)
	body = rpcBody(t, resp)
	res, _ = body["result"].(map[string]any)
	if resp.StatusCode != http.StatusOK || res["cacheScope"] != "private" || res["ttlMs"] != float64(60000) || res["resultType"] != "complete" {
		t.Errorf("raw tools/list: %d %v", resp.StatusCode, body)
	}
	if meta, _ := res["_meta"].(map[string]any); fmt.Sprint(meta["io.modelcontextprotocol/serverInfo"]) != "map[name:mcpbus version:dev]" {
		t.Errorf("tools/list _meta %v", res["_meta"])
	}
	// The legacy era still refuses a header version it does not speak.
	if status, code, data := errorOf(post(t, e.base+"/mcp", aliceKey, "", listBody, "Mcp-Protocol-Version", "1999-01-01")); status != http.StatusBadRequest || code != -32022 || data["requested"] != "1999-01-01" {
		t.Errorf("legacy request with an unsupported header: %d %v %v", status, code, data)
	}
}

// TestMCPModernEraHasNoStreamOrSessions: GET and DELETE on /mcp answer 405
// to a modern client (a 2026-07-28 header, or no session id) and keep
// working for a legacy session.
func TestMCPModernEraHasNoStreamOrSessions(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		for name, hdr := range map[string]map[string]string{
			"modern header": {"Mcp-Protocol-Version": "2026-07-28"},
			"no session":    {},
		} {
			req, _ := http.NewRequest(method, e.base+"/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+aliceKey)
			req.Header.Set("Accept", "text/event-stream")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
				t.Errorf("%s with %s: %d (Allow %q)", method, name, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	req, _ := http.NewRequest(http.MethodDelete, e.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("legacy DELETE: %d", resp.StatusCode)
	}
}

// TestMCPModernListenReachesEveryReplica: subscriptions/listen on replica
// B acknowledges first (with the subscription id; a second one of the
// user's beyond the stream cap is a 429, one without a key a 401), then
// delivers a catalog
// event published anywhere as list_changed tagged with it; a user's
// personal change reaches that user's listen only; mcp-go's Listen gets
// the notification through OnNotification; closing the replica ends the
// listen with its graceful response.
func TestMCPModernListenReachesEveryReplica(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	b, stopB := e.runAPI(t)
	listen := func(key string, id int) <-chan [2]string {
		resp := post(t, b+"/mcp", key, "", modernBody(id, "subscriptions/listen", `"notifications":{"toolsListChanged":true,"promptsListChanged":true}`), modernHeaders("subscriptions/listen", "")...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		ch := sseEvents(resp.Body)
		ack := nextEvent(t, ch)
		var m struct {
			Method string `json:"method"`
			Params struct {
				Meta          map[string]any  `json:"_meta"`
				Notifications map[string]bool `json:"notifications"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(ack[1]), &m); err != nil || m.Method != "notifications/subscriptions/acknowledged" ||
			m.Params.Meta["io.modelcontextprotocol/subscriptionId"] != float64(id) || fmt.Sprint(m.Params.Notifications) != "map[toolsListChanged:true]" {
			t.Fatalf("first message %v (%v)", ack, err)
		}
		return ch
	}
	aliceCh, bobCh := listen(aliceKey, 11), listen(bobKey, 12)
	// Listens count against the user's stream cap (1 per replica here), and
	// need a key.
	listenBody := modernBody(13, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)
	if resp := post(t, b+"/mcp", aliceKey, "", listenBody, modernHeaders("subscriptions/listen", "")...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("alice's second listen on B: %d", resp.StatusCode)
	}
	if resp := post(t, b+"/mcp", "", "", listenBody, modernHeaders("subscriptions/listen", "")...); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("listen without a key: %d", resp.StatusCode)
	}
	if resp := post(t, b+"/mcp", "wrong-key", "", modernBody(14, "tools/list", ""), modernHeaders("tools/list", "")...); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tools/list with a wrong key: %d", resp.StatusCode)
	}
	if err := e.bus.NC.Publish(e.bus.Names.EventsCatalog(), []byte(`{"generation":2}`)); err != nil {
		t.Fatal(err)
	}
	for id, ch := range map[int]<-chan [2]string{11: aliceCh, 12: bobCh} {
		ev := nextEvent(t, ch)
		if !strings.Contains(ev[1], `"notifications/tools/list_changed"`) || !strings.Contains(ev[1], fmt.Sprintf(`"io.modelcontextprotocol/subscriptionId":%d`, id)) {
			t.Errorf("listen %d got %v", id, ev)
		}
	}
	if err := e.bus.NC.Publish(e.bus.Names.PersonalEvents("bob"), []byte(`{"user_id":"bob"}`)); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, bobCh); !strings.Contains(ev[1], `"notifications/tools/list_changed"`) {
		t.Errorf("bob's listen after his personal change got %v", ev)
	}

	c := modernClient(t, e.base+"/mcp", aliceKey) // alice's stream cap on B (1) is taken
	var changed atomic.Int32
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed.Add(1)
		}
	})
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testkit.Eventually(t, 20*time.Second, "mcp-go's Listen to get list_changed", func() bool {
		_ = e.bus.NC.Publish(e.bus.Names.EventsCatalog(), []byte(`{"generation":3}`))
		return changed.Load() > 0
	})

	// Alice's listen on B ends with the graceful response when B closes.
	stopB()
	for {
		ev := nextEvent(t, aliceCh)
		if strings.Contains(ev[1], `"result"`) {
			if !strings.Contains(ev[1], `"id":11`) || !strings.Contains(ev[1], `"io.modelcontextprotocol/subscriptionId":11`) {
				t.Errorf("closing response %v", ev)
			}
			break
		}
	}
}

// TestMCPModernParamHeaders: for a tool whose schema marks arguments with
// x-mcp-header, mcp-go's default client mirrors them into Mcp-Param-*
// headers and is served; a raw request whose header differs from the
// argument, lacks it while the argument is sent (also with no Mcp-Param-*
// header at all), sends it without the argument, or carries a malformed
// value is a 400 with -32020 and is not run; numbers compare numerically; unknown Mcp-Param-* headers are
// ignored.
func TestMCPModernParamHeaders(t *testing.T) {
	t.Parallel()
	tool := bus.Tool{Name: "demo_echo", Server: "demo", OriginalName: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"q":{"type":"string"}}}`)}
	e := startWith(t, options{keys: testKeys(), tools: []bus.Tool{tool}})
	ctx := context.Background()
	c := modernClient(t, e.base+"/mcp", aliceKey)
	if list, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list: %+v %v", list, err)
	}
	var call mcp.CallToolRequest
	call.Params.Name = "demo_echo"
	call.Params.Arguments = map[string]any{"region": "us-west1", "n": 42, "q": "x"}
	if res, err := c.CallTool(ctx, call); err != nil || textOf(t, res) != "alice" {
		t.Fatalf("mcp-go call with mirrored headers: %+v %v", res, err)
	}
	body := modernBody(1, "tools/call", `"name":"demo_echo","arguments":{"region":"us-west1","n":42}`)
	hdr := func(extra ...string) []string { return append(modernHeaders("tools/call", "demo_echo"), extra...) }
	for _, c := range []struct {
		name string
		body string
		hdr  []string
		ok   bool
	}{
		{"both headers", body, hdr("Mcp-Param-Region", "us-west1", "Mcp-Param-N", "42"), true},
		{"number as 42.0, base64 region, unknown header", body, hdr("Mcp-Param-Region", "=?base64?dXMtd2VzdDE=?=", "Mcp-Param-N", "42.0", "Mcp-Param-Other", "x"), true},
		{"another region", body, hdr("Mcp-Param-Region", "eu-north1", "Mcp-Param-N", "42"), false},
		{"region header missing", body, hdr("Mcp-Param-N", "42"), false},
		{"no Mcp-Param header at all", body, hdr(), false},
		{"no Mcp-Param header, again (the tool is known to be annotated)", body, hdr(), false},
		{"no Mcp-Param header, no annotated argument", modernBody(1, "tools/call", `"name":"demo_echo","arguments":{"q":"x"}`), hdr(), true},
		{"header without the argument", modernBody(1, "tools/call", `"name":"demo_echo","arguments":{"n":42}`), hdr("Mcp-Param-Region", "us-west1", "Mcp-Param-N", "42"), false},
		{"malformed value", body, hdr("Mcp-Param-Region", "=?base64?***?=", "Mcp-Param-N", "42"), false},
		{"another number", body, hdr("Mcp-Param-Region", "us-west1", "Mcp-Param-N", "43"), false},
	} {
		resp := post(t, e.base+"/mcp", aliceKey, "", c.body, c.hdr...)
		m := rpcBody(t, resp)
		errObj, _ := m["error"].(map[string]any)
		if c.ok && (resp.StatusCode != http.StatusOK || errObj != nil) {
			t.Errorf("%s: %d %v", c.name, resp.StatusCode, m)
		}
		if !c.ok && (resp.StatusCode != http.StatusBadRequest || errObj["code"] != float64(-32020)) {
			t.Errorf("%s: %d %v, want 400 -32020", c.name, resp.StatusCode, m)
		}
	}
}
