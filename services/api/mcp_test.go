package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/api"
)

// mcpTools is a catalog of six tools, one of them deferred (so tool_search
// is listed first).
func mcpTools() []bus.Tool {
	var out []bus.Tool
	for i := range 4 {
		out = append(out, bus.Tool{Name: fmt.Sprintf("demo_t%d", i), Server: "demo", OriginalName: fmt.Sprintf("t%d", i),
			Description: fmt.Sprintf("tool %d", i), InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true}`)})
	}
	out[1].OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	out = append(out, bus.Tool{Name: "demo_hidden", Server: "demo", OriginalName: "hidden", InputSchema: json.RawMessage(`{"type":"object"}`), Deferred: true})
	out = append(out, bus.Tool{Name: "demo_echo", Server: "demo", OriginalName: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)})
	return out
}

func startMCP(t *testing.T) *env {
	t.Helper()
	return startWith(t, options{keys: testKeys(), tools: mcpTools(), mcp: api.MCPConfig{PageSize: 2, MaxStreamsPerUser: 1}})
}

// mcpClient is an initialized mcp-go streamable HTTP client with key.
func mcpClient(t *testing.T, url, key string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func initialize(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20251125,
		ClientInfo: mcp.Implementation{Name: "test", Version: "1"}}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var sb strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(mcp.TextContent)
		if !ok {
			t.Fatalf("content %T is not text", c)
		}
		sb.WriteString(tc.Text)
	}
	return sb.String()
}

// TestMCPStreamableHTTPServesTheCallersCatalog drives /mcp with mcp-go's
// streamable HTTP client: initialize with the routing hints as
// instructions, tools/list in pages of two without the deferred tool,
// schemas and annotations as the catalog has them, a call whose content is
// the bus reply's, an unknown tool as JSON-RPC -32602 that says what to
// do, and resources/list sent to the federation's subject.
func TestMCPStreamableHTTPServesTheCallersCatalog(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	c := mcpClient(t, e.base+"/mcp", aliceKey)
	init := initialize(t, c)
	if init.ProtocolVersion != mcp.ProtocolVersion20251125 || init.ServerInfo.Name != "mcpbus" {
		t.Errorf("initialize: %+v", init)
	}
	if init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged {
		t.Errorf("tools capability: %+v", init.Capabilities.Tools)
	}
	if init.Instructions != "<mcp_routing_hints>for alice</mcp_routing_hints>" {
		t.Errorf("instructions %q", init.Instructions)
	}
	ctx := context.Background()
	page, err := c.ListToolsByPage(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tools) != 2 || page.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q", len(page.Tools), page.NextCursor)
	}
	all, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range all.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "tool_search,demo_t0,demo_t1,demo_t2,demo_t3,demo_echo" {
		t.Errorf("listed %v", names)
	}
	t1 := all.Tools[2]
	out, _ := json.Marshal(t1.OutputSchema)
	if t1.Description != "tool 1" || !strings.Contains(string(out), `"n"`) || t1.Annotations.ReadOnlyHint == nil || !*t1.Annotations.ReadOnlyHint {
		t.Errorf("tool 1 as listed: %+v (output schema %s)", t1, out)
	}

	var call mcp.CallToolRequest
	call.Params.Name = "demo_echo"
	call.Params.Arguments = map[string]any{"x": "y"}
	res, err := c.CallTool(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || textOf(t, res) != "alice" {
		t.Errorf("call: error %v, text %q", res.IsError, textOf(t, res))
	}
	// An unknown tool is the protocol error the 2025-11-25 tools page
	// names (-32602), with toolcall's reason and what to do.
	call.Params.Name = "nope"
	if res, err = c.CallTool(ctx, call); err == nil {
		t.Fatalf("an unknown tool is a JSON-RPC error, not a result: %+v", res)
	}
	if !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), "Unknown tool: nope") || !strings.Contains(err.Error(), "not in the catalog") || !strings.Contains(err.Error(), "tools/list") {
		t.Errorf("unknown tool: %v", err)
	}
	// resources/list is federated: it goes to discovery's
	// mcpbus.resources.list, which this stack does not run.
	if _, err := c.ListResources(ctx, mcp.ListResourcesRequest{}); err == nil || !strings.Contains(err.Error(), "mcpbus.resources.list") {
		t.Errorf("resources/list: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
		t.Errorf("logging/setLevel: %v", err)
	}
}

// post sends one raw JSON-RPC message to /mcp.
func post(t *testing.T, url, key, session, body string, hdr ...string) *http.Response {
	t.Helper()
	var pairs []string
	if key != "" {
		pairs = append(pairs, "Authorization", "Bearer "+key)
	}
	if session != "" {
		pairs = append(pairs, "Mcp-Session-Id", session)
	}
	return postHeaders(t, url, body, false, append(pairs, hdr...)...)
}

// postHeaders POSTs a JSON-RPC body to url with the headers of hdr (name,
// value pairs), each setting its header or, with add, adding a value (a
// name given twice is then sent twice).
func postHeaders(t *testing.T, url, body string, add bool, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		if add {
			req.Header.Add(hdr[i], hdr[i+1])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func rpcBody(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("body is not JSON: %s", raw)
	}
	return m
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
const listBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

func rawInit(t *testing.T, base, key, version string) (string, map[string]any) {
	t.Helper()
	resp := post(t, base+"/mcp", key, "", fmt.Sprintf(initBody, version))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	return resp.Header.Get("Mcp-Session-Id"), rpcBody(t, resp)
}

// TestMCPNegotiatesTheProtocolVersion: a supported version is kept, an
// unknown one gets the newest, an unsupported Mcp-Protocol-Version header
// is a 400.
func TestMCPNegotiatesTheProtocolVersion(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	for requested, want := range map[string]string{"2025-03-26": "2025-03-26", "2025-06-18": "2025-06-18", "2024-11-05": "2024-11-05", "2099-01-01": "2025-11-25"} {
		_, body := rawInit(t, e.base, aliceKey, requested)
		res, _ := body["result"].(map[string]any)
		if res["protocolVersion"] != want {
			t.Errorf("requested %s: got %v, want %s", requested, res["protocolVersion"], want)
		}
	}
	id, _ := rawInit(t, e.base, aliceKey, "2025-06-18")
	if resp := post(t, e.base+"/mcp", aliceKey, id, listBody, "Mcp-Protocol-Version", "1999-01-01"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unsupported protocol header: %d", resp.StatusCode)
	}
	if resp := post(t, e.base+"/mcp", aliceKey, id, `{"jsonrpc":"2.0","id":3,`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d", resp.StatusCode)
	} else if errObj, _ := rpcBody(t, resp)["error"].(map[string]any); errObj["code"] != float64(-32700) {
		t.Errorf("malformed JSON error: %v", errObj)
	}
	resp := post(t, e.base+"/mcp", aliceKey, id, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}`)
	if errObj, _ := rpcBody(t, resp)["error"].(map[string]any); errObj["code"] != float64(-32602) {
		t.Errorf("tools/call without a name: %v", errObj)
	}
}

// TestMCPRequiresAnAPIKey: no key or a wrong key is a 401 with
// WWW-Authenticate: Bearer on every MCP path.
func TestMCPRequiresAnAPIKey(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	for _, key := range []string{"", "wrong-key"} {
		resp := post(t, e.base+"/mcp", key, "", fmt.Sprintf(initBody, "2025-11-25"))
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("key %q: %d, WWW-Authenticate %q", key, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		for _, path := range []string{"/sse", "/messages?session_id=x"} {
			method := http.MethodGet
			if strings.HasPrefix(path, "/messages") {
				method = http.MethodPost
			}
			status, _ := e.raw(t, method, path, key, "")
			if status != http.StatusUnauthorized {
				t.Errorf("%s %s with key %q: %d", method, path, key, status)
			}
		}
	}
}

// TestMCPSessionsSurviveTheReplica: a session initialized on replica A is
// served by replica B; another user's key with it is a 404; a request
// without a session is a 400; DELETE on B ends it for A too (404).
func TestMCPSessionsSurviveTheReplica(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	b := e.addReplica(t)
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	if id == "" {
		t.Fatal("initialize issued no Mcp-Session-Id")
	}
	resp := post(t, b+"/mcp", aliceKey, id, listBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session of A on B: %d", resp.StatusCode)
	}
	res, _ := rpcBody(t, resp)["result"].(map[string]any)
	if tools, _ := res["tools"].([]any); len(tools) != 2 {
		t.Errorf("tools/list on B: %v", res)
	}
	if resp := post(t, b+"/mcp", bobKey, id, listBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("alice's session with bob's key: %d", resp.StatusCode)
	}
	if resp := post(t, b+"/mcp", aliceKey, "", listBody); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no session: %d", resp.StatusCode)
	}
	if resp := post(t, b+"/mcp", aliceKey, "0123", listBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodDelete, b+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Mcp-Session-Id", id)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if del.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %d", del.StatusCode)
	}
	if resp := post(t, e.base+"/mcp", aliceKey, id, listBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleted session on A: %d", resp.StatusCode)
	}
	// The mcp-go client reports the 404 as a terminated session.
	c := mcpClient(t, b+"/mcp", aliceKey)
	initialize(t, c)
	sid := c.GetSessionId()
	req, _ = http.NewRequest(http.MethodDelete, e.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Mcp-Session-Id", sid)
	if del, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if _, err := c.ListTools(context.Background(), mcp.ListToolsRequest{}); err == nil || !strings.Contains(err.Error(), transport.ErrSessionTerminated.Error()) {
		t.Errorf("a client of a deleted session: %v", err)
	}
}

// TestMCPSessionMirrorsFollowEveryReplica: both replicas keep sessions in
// a mirror of the bucket. A session created on one is served by the other
// at once; with the session held by both mirrors, a DELETE on either is a
// 404 on the other on the very next request (the DELETE returns once
// every replica's mirror dropped it), in both directions.
func TestMCPSessionMirrorsFollowEveryReplica(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	b := e.addReplica(t)
	del := func(base, id string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodDelete, base+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE on %s: %d", base, resp.StatusCode)
		}
	}
	for _, dir := range []struct{ name, from, on string }{{"A to B", e.base, b}, {"B to A", b, e.base}} {
		for i := range 5 {
			id, _ := rawInit(t, dir.on, aliceKey, "2025-11-25")
			for _, base := range []string{dir.from, dir.on, dir.from} {
				if resp := post(t, base+"/mcp", aliceKey, id, listBody); resp.StatusCode != http.StatusOK {
					t.Fatalf("%s #%d: the session on %s: %d", dir.name, i, base, resp.StatusCode)
				}
			}
			del(dir.from, id)
			if resp := post(t, dir.on+"/mcp", aliceKey, id, listBody); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s #%d: right after the DELETE on the other replica: %d", dir.name, i, resp.StatusCode)
			}
		}
	}
}

// TestMCPAnswersAsTheClientAccepts: a client that takes only
// text/event-stream gets the response as one SSE event; notifications get
// 202 with no body.
func TestMCPAnswersAsTheClientAccepts(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	resp := post(t, e.base+"/mcp", aliceKey, id, listBody, "Accept", "text/event-stream")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(raw), "event: message\ndata: {") || !strings.Contains(string(raw), `"demo_t0"`) {
		t.Errorf("SSE body %q", raw)
	}
	resp = post(t, e.base+"/mcp", aliceKey, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: %d", resp.StatusCode)
	}
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"demo_echo","arguments":{"x":%q}}}`, strings.Repeat("a", 70<<10))
	if resp := post(t, e.base+"/mcp", aliceKey, id, big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the REST limit: %d", resp.StatusCode)
	}
}

// openStream opens a GET stream and returns its reader.
func openStream(t *testing.T, method, url, key, session string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestMCPStreamsAreCappedAndClosedOnShutdown: a user's second open stream
// on a replica (cap 1) is a 429 while another user's is fine; shutting the
// replica down ends the open streams with a retry hint.
func TestMCPStreamsAreCappedAndClosedOnShutdown(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	first := openStream(t, http.MethodGet, e.base+"/mcp", aliceKey, id)
	if first.StatusCode != http.StatusOK || first.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %d %s", first.StatusCode, first.Header.Get("Content-Type"))
	}
	if second := openStream(t, http.MethodGet, e.base+"/sse", aliceKey, ""); second.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second stream of alice: %d", second.StatusCode)
	}
	bobs := openStream(t, http.MethodGet, e.base+"/sse", bobKey, "")
	if bobs.StatusCode != http.StatusOK {
		t.Errorf("bob's stream: %d", bobs.StatusCode)
	}
	e.stop()
	raw, _ := io.ReadAll(first.Body) // ends: the replica closed it
	if !strings.Contains(string(raw), "retry: 1000") {
		t.Errorf("closed stream said %q", raw)
	}
}

// sseEvents reads "event:"/"data:" pairs from an SSE stream.
func sseEvents(r io.Reader) <-chan [2]string {
	ch := make(chan [2]string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ch <- [2]string{ev, strings.TrimPrefix(line, "data: ")}
			}
		}
	}()
	return ch
}

func nextEvent(t *testing.T, ch <-chan [2]string) [2]string {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20s")
	}
	return [2]string{}
}

// TestMCPLegacySSE drives the 2024-11-05 transport with mcp-go's SSE
// client (initialize, list, call), then by hand across replicas: the stream
// on A, the messages posted to B, the responses on A's stream.
func TestMCPLegacySSE(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	c, err := client.NewSSEMCPClient(e.base+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + bobKey}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20241105, ClientInfo: mcp.Implementation{Name: "sse"}}})
	if err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != mcp.ProtocolVersion20241105 {
		t.Errorf("negotiated %s", init.ProtocolVersion)
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(list.Tools) != 6 {
		t.Fatalf("list over SSE: %v %v", list, err)
	}
	var call mcp.CallToolRequest
	call.Params.Name = "demo_echo"
	res, err := c.CallTool(ctx, call)
	if err != nil || textOf(t, res) != "bob" {
		t.Fatalf("call over SSE: %v %v", res, err)
	}
	_ = c.Close()

	b := e.addReplica(t)
	stream := openStream(t, http.MethodGet, e.base+"/sse", aliceKey, "")
	events := sseEvents(stream.Body)
	ep := nextEvent(t, events)
	if ep[0] != "endpoint" || !strings.HasPrefix(ep[1], "messages?session_id=") {
		t.Fatalf("first event %v", ep)
	}
	postB := func(key, body string) int { return post(t, b+"/"+ep[1], key, "", body).StatusCode }
	if st := postB(aliceKey, fmt.Sprintf(initBody, "2024-11-05")); st != http.StatusAccepted {
		t.Fatalf("initialize on B: %d", st)
	}
	if ev := nextEvent(t, events); !strings.Contains(ev[1], `"protocolVersion":"2024-11-05"`) {
		t.Errorf("initialize response on A's stream: %v", ev)
	}
	if st := postB(aliceKey, listBody); st != http.StatusAccepted {
		t.Fatalf("tools/list on B: %d", st)
	}
	if ev := nextEvent(t, events); !strings.Contains(ev[1], `"demo_t0"`) || !strings.Contains(ev[1], `"nextCursor"`) {
		t.Errorf("tools/list response on A's stream: %v", ev)
	}
	if st := postB(bobKey, listBody); st != http.StatusNotFound {
		t.Errorf("alice's SSE session with bob's key: %d", st)
	}
	stream.Body.Close()
	testkit.Eventually(t, 20*time.Second, "the session to end with its stream", func() bool { return postB(aliceKey, listBody) == http.StatusNotFound })
}

// TestMCPListChangedReachesStreamsOnEveryReplica: a catalog event reaches
// the GET streams on both replicas and a legacy SSE stream as
// notifications/tools/list_changed; a user's personal connection event
// reaches that user's stream.
func TestMCPListChangedReachesStreamsOnEveryReplica(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	b := e.addReplica(t)
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	onA := sseEvents(openStream(t, http.MethodGet, e.base+"/mcp", aliceKey, id).Body)
	onB := sseEvents(openStream(t, http.MethodGet, b+"/mcp", aliceKey, id).Body)
	bobSSE := sseEvents(openStream(t, http.MethodGet, b+"/sse", bobKey, "").Body)
	if ev := nextEvent(t, bobSSE); ev[0] != "endpoint" {
		t.Fatalf("first SSE event %v", ev)
	}
	// The streams are registered once their headers are out; a catalog
	// event published from now on reaches them.
	if err := e.bus.NC.Publish(e.bus.Names.EventsCatalog(), []byte(`{"generation":2}`)); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan [2]string{"A": onA, "B": onB, "bob's SSE": bobSSE} {
		if ev := nextEvent(t, ch); !strings.Contains(ev[1], `"notifications/tools/list_changed"`) {
			t.Errorf("stream on %s got %v", name, ev)
		}
	}
	if err := e.bus.NC.Publish(e.bus.Names.PersonalEvents("bob"), []byte(`{"user_id":"bob"}`)); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, bobSSE); !strings.Contains(ev[1], `"notifications/tools/list_changed"`) {
		t.Errorf("bob's stream after his personal change got %v", ev)
	}
}

// TestMCPIdleSessionsExpire: a session unused for the idle timeout is gone
// from the bucket (which holds only the id's digest, never the id) and is
// then a 404, so the client initializes again.
func TestMCPIdleSessionsExpire(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), tools: mcpTools(), mcp: api.MCPConfig{IdleTimeout: time.Second}})
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	kv, err := e.bus.JS.KeyValue(context.Background(), e.bus.Names.MCPSessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := bus.Digest("alice") + "." + bus.Digest(id)
	entry, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("the session is not in the bucket under its digest: %v", err)
	}
	if strings.Contains(string(entry.Value()), id) {
		t.Errorf("the bucket holds the session id: %s", entry.Value())
	}
	keys, _ := kv.Keys(context.Background())
	for _, k := range keys {
		if k == id {
			t.Error("the session id is a bucket key")
		}
	}
	testkit.Eventually(t, 30*time.Second, "the idle session to expire", func() bool {
		_, err := kv.Get(context.Background(), key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	if resp := post(t, e.base+"/mcp", aliceKey, id, listBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("expired session: %d", resp.StatusCode)
	}
}

// TestMCPKeylessModeKeepsTheBrowserGuard: without API keys every caller is
// "default", and /mcp keeps REST's browser checks: a foreign Origin, a
// rebinding Host and a text/plain POST are refused.
func TestMCPKeylessModeKeepsTheBrowserGuard(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{tools: mcpTools()})
	_, body := rawInit(t, e.base, "", "2025-11-25")
	if res, _ := body["result"].(map[string]any); res["instructions"] != "<mcp_routing_hints>for default</mcp_routing_hints>" {
		t.Errorf("key-less initialize: %v", body)
	}
	init := fmt.Sprintf(initBody, "2025-11-25")
	if resp := post(t, e.base+"/mcp", "", "", init, "Origin", "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin: %d", resp.StatusCode)
	}
	if resp := post(t, e.base+"/mcp", "", "", init, "Content-Type", "text/plain"); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain POST: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, e.base+"/sse", nil)
	req.Host = "attacker.example:8001"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebinding Host on /sse: %d", resp.StatusCode)
	}
}

// TestMCPToolSearchPromotesForTheThread: the deferred tool is neither
// listed nor callable (an isError result naming tool_search); tool_search
// on replica A promotes it for the (user, thread), announces list_changed
// on the user's stream on replica B, and B lists it and calls it; another
// thread of the same user still has it deferred.
func TestMCPToolSearchPromotesForTheThread(t *testing.T) {
	t.Parallel()
	e := startMCP(t)
	b := e.addReplica(t)
	id, _ := rawInit(t, e.base, aliceKey, "2025-11-25")
	thread := []string{"Mcpbus-Thread-Id", "th-1"}
	call := func(base, name string, hdr ...string) map[string]any {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{"query":"select:demo_hidden"}}}`, name)
		res, _ := rpcBody(t, post(t, base+"/mcp", aliceKey, id, body, hdr...))["result"].(map[string]any)
		return res
	}
	listAll := func(base string, hdr ...string) string {
		var names []string
		cursor := ""
		for {
			params := "{}"
			if cursor != "" {
				params = fmt.Sprintf(`{"cursor":%q}`, cursor)
			}
			res, _ := rpcBody(t, post(t, base+"/mcp", aliceKey, id, `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":`+params+`}`, hdr...))["result"].(map[string]any)
			tools, _ := res["tools"].([]any)
			for _, tl := range tools {
				names = append(names, tl.(map[string]any)["name"].(string))
			}
			if cursor, _ = res["nextCursor"].(string); cursor == "" {
				return strings.Join(names, ",")
			}
		}
	}
	if got := listAll(b, thread...); strings.Contains(got, "demo_hidden") || !strings.HasPrefix(got, "tool_search,") {
		t.Fatalf("before tool_search: %s", got)
	}
	if res := call(b, "demo_hidden", thread...); res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "tool_search") {
		t.Errorf("calling the deferred tool: %v", res)
	}
	stream := sseEvents(openStream(t, http.MethodGet, b+"/mcp", aliceKey, id).Body)
	res := call(e.base, "tool_search", thread...)
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["structuredContent"]), "demo_hidden") {
		t.Fatalf("tool_search: %v", res)
	}
	if ev := nextEvent(t, stream); !strings.Contains(ev[1], "notifications/tools/list_changed") {
		t.Errorf("B's stream after a promotion on A: %v", ev)
	}
	if got := listAll(b, thread...); !strings.Contains(got, "demo_hidden") {
		t.Errorf("after tool_search, B lists %s", got)
	}
	if res := call(b, "demo_hidden", thread...); res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "deferred ran") {
		t.Errorf("calling the promoted tool on B: %v", res)
	}
	if got := listAll(b, "Mcpbus-Thread-Id", "th-2"); strings.Contains(got, "demo_hidden") {
		t.Errorf("another thread lists the promoted tool: %s", got)
	}
}

// TestMCPOpenStreamsKeepTheirSessions: an open /sse stream keeps its
// session (initialized over /messages) alive with its keep-alives, writing
// the initialized record, not the stream's copy; a GET /mcp stream ends
// once its session is deleted.
func TestMCPOpenStreamsKeepTheirSessions(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), tools: mcpTools(), mcp: api.MCPConfig{IdleTimeout: time.Second, KeepAlive: 50 * time.Millisecond}})
	stream := openStream(t, http.MethodGet, e.base+"/sse", aliceKey, "")
	events := sseEvents(stream.Body)
	ep := nextEvent(t, events)
	postMsg := func(body string) int { return post(t, e.base+"/"+ep[1], aliceKey, "", body).StatusCode }
	if st := postMsg(fmt.Sprintf(initBody, "2025-03-26")); st != http.StatusAccepted {
		t.Fatalf("initialize: %d", st)
	}
	nextEvent(t, events)
	kv, err := e.bus.JS.KeyValue(context.Background(), e.bus.Names.MCPSessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := bus.Digest("alice") + "." + bus.Digest(strings.TrimPrefix(ep[1], "messages?session_id="))
	first, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "a keep-alive to rewrite the session", func() bool {
		cur, err := kv.Get(context.Background(), key)
		return err == nil && cur.Revision() > first.Revision()
	})
	cur, _ := kv.Get(context.Background(), key)
	if !strings.Contains(string(cur.Value()), `"protocol_version":"2025-03-26"`) {
		t.Errorf("the keep-alive wrote %s", cur.Value())
	}
	if st := postMsg(listBody); st != http.StatusAccepted {
		t.Errorf("tools/list after keep-alives: %d", st)
	}

	id, _ := rawInit(t, e.base, bobKey, "2025-11-25")
	get := openStream(t, http.MethodGet, e.base+"/mcp", bobKey, id)
	req, _ := http.NewRequest(http.MethodDelete, e.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+bobKey)
	req.Header.Set("Mcp-Session-Id", id)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if _, err := io.ReadAll(get.Body); err != nil { // returns once the stream ends
		t.Errorf("GET stream after DELETE: %v", err)
	}
}
