package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

const mcpAdminKey = "mcp-admin-key-0003"

// pairingStack is `mcpbus dev` (with a credentials key) in front of the
// demo server in its legacy (leg) and modern-only (mod) modes, both with
// the bridging tools, and server-everything (ev), all over stdio.
type pairingStack struct {
	dir, base, natsURL string
}

func startPairingStack(t *testing.T) *pairingStack {
	t.Helper()
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	st := &pairingStack{dir: dir, base: "http://" + apiAddr}
	ext := fmt.Sprintf(`{"mcpServers": {
		"leg": {"type": "stdio", "command": %q, "args": ["-era", "legacy", "-bridge"]},
		"mod": {"type": "stdio", "command": %q, "args": ["-era", "modern", "-bridge"]},
		"ev": {"type": "stdio", "command": "node", "args": [%q, "stdio"]}
	}}`, demoBin, demoBin, testkit.Everything(t))
	settings := fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
    - {sha256: %s, user_id: root, role: admin}
`, apiAddr, sha(mcpAliceKey), sha(mcpBobKey), sha(mcpAdminKey))
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	dev := startDevIn(t, dir, ext, settings, "MCPBUS_CREDENTIALS_KEY="+key)
	t.Cleanup(func() { dev.stop(t) })
	st.natsURL = devNATSURL(t, dir)
	return st
}

// serverEra is the era discovery reports for server (GET /api/mcp/servers).
func (st *pairingStack) serverEra(t *testing.T, server string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, st.base+"/api/mcp/servers", nil)
	req.Header.Set("Authorization", "Bearer "+mcpAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Servers []struct {
			Name, State, Era string
			ProtocolVersion  string `json:"protocol_version"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET /api/mcp/servers: %d %v", resp.StatusCode, err)
	}
	for _, s := range r.Servers {
		if s.Name == server {
			return s.Era
		}
	}
	return ""
}

// modernPost sends one 2026-07-28 tools/call of name over HTTP as the
// user of key, with the mirrored headers, caps as its clientCapabilities
// and extra params, and returns the HTTP status and the JSON-RPC response.
func (st *pairingStack) modernPost(t *testing.T, key, name, caps, extra string) (int, rpcReply) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{"message":"go"}%s,`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}}}`, name, extra, caps)
	req, _ := http.NewRequest(http.MethodPost, st.base+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name} {
		req.Header.Set(k, v)
	}
	return st.do(t, req)
}

// legacyPost sends one tools/call of name in alice's legacy session over
// HTTP, accepting JSON only (no stream back), and returns the HTTP status
// and the JSON-RPC response.
func (st *pairingStack) legacyPost(t *testing.T, session, name string) (int, rpcReply) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":%q,"arguments":{"message":"go"}}}`, name)
	req, _ := http.NewRequest(http.MethodPost, st.base+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + mcpAliceKey, "Content-Type": "application/json", "Accept": "application/json",
		"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": session} {
		req.Header.Set(k, v)
	}
	return st.do(t, req)
}

// do sends req and decodes its JSON-RPC response (JSON or one SSE event).
func (st *pairingStack) do(t *testing.T, req *http.Request) (int, rpcReply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// One message event: its data line.
		for _, line := range strings.Split(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(data)
			}
		}
	}
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %d %s: %v", req.URL, resp.StatusCode, b, err)
	}
	return resp.StatusCode, r
}

type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// accepting is an elicitation handler that accepts with {"ok": true}.
type accepting struct{}

func (accepting) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"ok": true}}}, nil
}

// pairingClient is an MCP client of the era (legacy: 2025-11-25 with a
// session; modern: 2026-07-28) on /mcp as alice, which accepts
// elicitations (so it declares the capability).
func (st *pairingStack) pairingClient(t *testing.T, era string) (*client.Client, *progressLog) {
	t.Helper()
	var opts []transport.StreamableHTTPCOption
	copts := []client.ClientOption{client.WithElicitationHandler(accepting{})}
	if era == "legacy" {
		opts = append(opts, transport.WithContinuousListening())
		copts = append(copts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	}
	tr, err := transport.NewStreamableHTTP(st.base+"/mcp", append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + mcpAliceKey}))...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, copts...)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := watchProgress(c)
	if era == "legacy" {
		if res := initialized(t, c, mcp.ProtocolVersion20251125); res.ProtocolVersion != mcp.ProtocolVersion20251125 || c.GetSessionId() == "" {
			t.Fatalf("legacy client: %q, session %q", res.ProtocolVersion, c.GetSessionId())
		}
	} else {
		modernInitialized(t, c)
	}
	return c, log
}

// listChangedOf returns a channel firing on the client's tools/list_changed:
// on the legacy session's GET stream, or a subscriptions/listen stream.
func listChangedOf(t *testing.T, c *client.Client, era string) <-chan struct{} {
	t.Helper()
	if era == "modern" {
		return listChangedSignal(t, c)
	}
	changed := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	return changed
}

// callErr calls name and returns the call's error (nil when it answered).
func callErr(t *testing.T, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = name, args
	return c.CallTool(ctx, req)
}

// TestMCPEraPairings runs the four pairings of a downstream client era
// (legacy 2025-11-25 session, modern 2026-07-28) and an upstream era (the
// demo server with -era legacy and -era modern), and server-everything
// (which settles on the legacy era) behind both clients, over one `mcpbus
// dev`: discovery's era, tools/list, tools/call, progress, cancellation
// reaching the upstream, list_changed, and the bridging between eras. The
// demo's confirm tool asks for an elicitation the 2026-07-28 way
// (input_required; a legacy-era demo turns it into its own
// elicitation/create): with a modern upstream both clients complete it
// (the result relayed to a modern client, whose retry carries
// inputResponses and requestState back; for a legacy client mcpbus asks
// with elicitation/create on the request's stream and retries with its
// answer); a legacy upstream's elicitation/create is relayed to a legacy
// client and refused for a modern one (-32021 naming the server), as it
// is for a legacy request whose response cannot be a stream. The demo's busy tool sheds
// load (input_required with a requestState alone): a modern client
// retries, mcpbus retries for a legacy one. The client's capabilities
// reach a modern upstream in the call's _meta.
func TestMCPEraPairings(t *testing.T) {
	t.Parallel()
	st := startPairingStack(t)
	rows := []struct {
		client, server, era string
		demo                bool // the demo server: cancellation and bridging
		listChanged         bool
	}{
		{client: "legacy", server: "leg", era: "legacy", demo: true, listChanged: true},
		{client: "legacy", server: "mod", era: "modern", demo: true},
		{client: "modern", server: "leg", era: "legacy", demo: true, listChanged: true},
		{client: "modern", server: "mod", era: "modern", demo: true},
		{client: "legacy", server: "ev", era: "legacy"},
		{client: "modern", server: "ev", era: "legacy"},
	}
	clients := map[string]*client.Client{}
	logs := map[string]*progressLog{}
	for _, era := range []string{"legacy", "modern"} {
		clients[era], logs[era] = st.pairingClient(t, era)
	}
	testkit.Eventually(t, 90*time.Second, "every server in the catalog", func() bool {
		names := listedNames(t, clients["modern"])
		return slices.Contains(names, "leg_echo") && slices.Contains(names, "mod_echo") && slices.Contains(names, "ev_echo")
	})
	for _, row := range rows {
		t.Run(row.client+"-client/"+row.server, func(t *testing.T) {
			c, log := clients[row.client], logs[row.client]
			if got := st.serverEra(t, row.server); got != row.era {
				t.Errorf("discovery: era of %s = %q, want %q", row.server, got, row.era)
			}
			if names := listedNames(t, c); !slices.Contains(names, row.server+"_echo") {
				t.Errorf("tools/list: no %s_echo in %v", row.server, names)
			}
			msg := row.client + " to " + row.server
			if text, isErr := callText(t, c, row.server+"_echo", map[string]any{"message": msg}); isErr || !strings.Contains(text, msg) {
				t.Errorf("tools/call echo: %q %v", text, isErr)
			}
			token := row.client + "-" + row.server
			if !row.demo {
				checkEverythingProgress(t, c, log, row.server+"_trigger-long-running-operation", token)
				return
			}
			checkProgress(t, c, log, row.server+"_progress", token)
			if row.client == "legacy" {
				checkCancel(t, c, row.server, "cancel-"+token)
			} else {
				checkModernCancel(t, c, row.server, true)
			}
			if row.listChanged {
				awaitPairingListChanged(t, st, listChangedOf(t, c, row.client))
			}

			// Bridging: the confirm tool's elicitation.
			res, err := callErr(t, c, row.server+"_confirm", map[string]any{"message": "go"})
			if row.era == "modern" || row.client == "legacy" {
				// Relayed to a modern client; asked of a legacy one (a
				// legacy upstream's own elicitation/create too).
				if err != nil || res.IsError || !strings.Contains(resultText(res), "confirmed: action=accept") || !strings.Contains(resultText(res), "state=demo-confirm-state-1") {
					t.Errorf("confirm: %v %+v", err, res)
				}
			} else if !errors.As(err, new(mcp.MissingRequiredClientCapabilityError)) {
				t.Errorf("confirm: %v %+v, want -32021", err, res)
			}
			if row.client == "legacy" {
				// The wire, on a request whose response cannot be a
				// stream (mcpbus cannot ask then): -32021 naming the
				// server, saying why.
				why := map[string]string{"leg": "legacy MCP era", "mod": "Accept text/event-stream"}[row.server]
				if status, r := st.legacyPost(t, c.GetSessionId(), row.server+"_confirm"); status != http.StatusOK || r.Error == nil || r.Error.Code != -32021 ||
					!strings.Contains(r.Error.Message, "'"+row.server+"'") || !strings.Contains(r.Error.Message, why) {
					t.Errorf("confirm from a legacy client without a stream: %d %+v", status, r.Error)
				}
			}
			// Load shedding (input_required with a requestState alone):
			// a modern client retries, mcpbus retries for a legacy one; a
			// legacy upstream fails the call itself.
			res, err = callErr(t, c, row.server+"_busy", nil)
			if row.era == "modern" && (err != nil || res.IsError || resultText(res) != "done after a retry") {
				t.Errorf("busy: %v %+v", err, res)
			}
			if row.era == "legacy" && (err != nil || !res.IsError) {
				t.Errorf("busy on a legacy upstream: %v %+v, want an isError result", err, res)
			}
			if row.era == "modern" {
				if text, _ := callText(t, c, row.server+"_client_capabilities", nil); text != `{"elicitation":{}}` {
					t.Errorf("client capabilities at the modern upstream = %s, want the client's", text)
				}
			}
		})
	}

	// The same over raw 2026-07-28 HTTP, to see the wire: without the
	// capability, 400 -32021 naming the server; with it, the upstream's
	// input_required, its requestState sealed to alice and the tool, and
	// the retry's answers reach the upstream with the state it issued.
	for _, server := range []string{"leg", "mod"} {
		status, r := st.modernPost(t, mcpAliceKey, server+"_confirm", `{}`, "")
		if status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32021 ||
			!strings.Contains(r.Error.Message, "'"+server+"'") || !strings.Contains(string(r.Error.Data), `"requiredCapabilities":{"elicitation":{}}`) {
			t.Errorf("%s_confirm without elicitation: %d %+v", server, status, r.Error)
		}
	}
	_, r := st.modernPost(t, mcpAliceKey, "mod_confirm", `{"elicitation":{}}`, "")
	var ir struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &ir) != nil || ir.ResultType != "input_required" ||
		ir.InputRequests["confirm"].Method != "elicitation/create" || !strings.HasPrefix(ir.RequestState, "mcpbus1.") || strings.Contains(ir.RequestState, "demo-confirm") {
		t.Fatalf("mod_confirm with elicitation: %s %+v", r.Result, r.Error)
	}
	retry := func(key, state string) (int, rpcReply) {
		return st.modernPost(t, key, "mod_confirm", `{"elicitation":{}}`,
			`,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":`+strconv.Quote(state))
	}
	_, r = retry(mcpAliceKey, ir.RequestState)
	if r.Error != nil || !strings.Contains(string(r.Result), `confirmed: action=accept content={\"ok\":true} state=demo-confirm-state-1`) ||
		!strings.Contains(string(r.Result), `"resultType":"complete"`) {
		t.Errorf("mod_confirm retry: %s %+v", r.Result, r.Error)
	}
	// The attack: alice's state presented by bob, altered, or the
	// upstream's own (unsealed) state never reaches the upstream.
	tampered := ir.RequestState[:len(ir.RequestState)-2] + "AA"
	if tampered == ir.RequestState {
		tampered = ir.RequestState[:len(ir.RequestState)-2] + "BB"
	}
	for name, try := range map[string][2]string{"bob replaying alice's": {mcpBobKey, ir.RequestState},
		"tampered": {mcpAliceKey, tampered}, "unsealed": {mcpAliceKey, "demo-confirm-state-1"}} {
		if status, r := retry(try[0], try[1]); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("%s requestState: %d %s %+v, want 400 -32602", name, status, r.Result, r.Error)
		}
	}
}

// resultText is the text of res's content blocks.
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var sb strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// checkEverythingProgress calls server-everything's long-running operation
// with a progress token: its three notifications arrive in order before
// the result.
func checkEverythingProgress(t *testing.T, c *client.Client, l *progressLog, tool, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, map[string]any{"duration": 0.3, "steps": 3}
	req.Params.Meta = &mcp.Meta{ProgressToken: token}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	want := []string{"1/3 <nil>", "2/3 <nil>", "3/3 <nil>"}
	if got := l.of(token); !slices.Equal(got, want) {
		t.Errorf("%s: progress before the result = %q, want %q", tool, got, want)
	}
}

// awaitPairingListChanged resets the cache until changed fires.
func awaitPairingListChanged(t *testing.T, st *pairingStack, changed <-chan struct{}) {
	t.Helper()
	awaitListChanged(t, &mcpStack{dir: st.dir, natsURL: st.natsURL}, changed)
}
