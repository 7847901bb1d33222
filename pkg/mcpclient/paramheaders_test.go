package mcpclient_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// headerToolsJSON is a tools/list result with one tool whose x-mcp-header
// annotations are valid and four whose are not.
const headerToolsJSON = `{"tools":[
 {"name":"valid","inputSchema":{"type":"object","properties":{
   "region":{"type":"string","x-mcp-header":"Region"},
   "note":{"type":"string","x-mcp-header":"Note"},
   "count":{"type":"integer","x-mcp-header":"Count"},
   "flag":{"type":"boolean","x-mcp-header":"Flag"},
   "gone":{"type":"string","x-mcp-header":"Gone"},
   "plain":{"type":"string"}}}},
 {"name":"empty_header","inputSchema":{"type":"object","properties":{"v":{"type":"string","x-mcp-header":""}}}},
 {"name":"object_header","inputSchema":{"type":"object","properties":{"v":{"type":"object","x-mcp-header":"V"}}}},
 {"name":"duplicate_header","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Same"},"b":{"type":"string","x-mcp-header":"same"}}}},
 {"name":"colon_header","inputSchema":{"type":"object","properties":{"v":{"type":"string","x-mcp-header":"A:B"}}}},
 {"name":"unannotated","inputSchema":{"type":"object"}}]}`

// headerServer is a streamable HTTP MCP server of one era (modern answers
// server/discover with 2026-07-28; legacy refuses it and takes
// initialize) serving headerToolsJSON, and keeping the headers of every
// tools/call it receives.
type headerServer struct {
	modern bool
	mu     sync.Mutex
	calls  []http.Header
}

func (s *headerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(field, value string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"`+field+`":`+value+`}`)
	}
	switch msg.Method {
	case "server/discover":
		if !s.modern {
			w.WriteHeader(http.StatusBadRequest)
			reply("error", `{"code":-32601,"message":"method not found"}`)
			return
		}
		reply("result", `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"headers","version":"1"}}`)
	case "initialize":
		reply("result", `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"headers","version":"1"}}`)
	case "tools/list":
		reply("result", headerToolsJSON)
	case "tools/call":
		s.mu.Lock()
		s.calls = append(s.calls, r.Header.Clone())
		s.mu.Unlock()
		reply("result", `{"content":[{"type":"text","text":"ok"}]}`)
	default:
		reply("error", `{"code":-32601,"message":"method not found"}`)
	}
}

// lastCall returns the headers of the last tools/call.
func (s *headerServer) lastCall(t *testing.T) http.Header {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		t.Fatal("the server received no tools/call")
	}
	return s.calls[len(s.calls)-1]
}

// paramHeaderNames lists h's Mcp-Param-* headers with their values.
func paramHeaderNames(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Mcp-Param-") {
			out[k] = v[0]
		}
	}
	return out
}

const headerArgs = `{"region":"us-west1","note":"Hello, 世界","count":42,"flag":false,"gone":null,"plain":"SELECT 1"}`

// In the modern era over streamable HTTP, tools/list leaves out the tools
// whose x-mcp-header annotations are invalid, and a call given the tool's
// schema (CallOptions.InputSchema) mirrors the annotated arguments into
// Mcp-Param-* headers: plain ASCII as is, other text Base64-wrapped,
// numbers and booleans as text, null and unannotated ones not at all.
func TestModernParamHeaders(t *testing.T) {
	t.Parallel()
	srv := &headerServer{modern: true}
	c := connect(t, mcpclient.Spec{Server: "headers", Transport: mcpclient.TransportHTTP, URL: newStreamableServer(t, srv).URL})
	if era := c.ServerInfo().Era; era != mcpclient.EraModern {
		t.Fatalf("era = %q", era)
	}
	tools := listTools(t, c)
	if got, want := toolNames(tools), []string{"valid", "unannotated"}; !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v (the invalid annotations left out)", got, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	valid := findTool(t, tools, "valid")
	if _, err := c.CallTool(ctx, "valid", json.RawMessage(headerArgs), &mcpclient.CallOptions{InputSchema: valid.InputSchema}); err != nil {
		t.Fatal(err)
	}
	h := srv.lastCall(t)
	want := map[string]string{
		"Mcp-Param-Region": "us-west1",
		"Mcp-Param-Note":   "=?base64?SGVsbG8sIOS4lueVjA==?=",
		"Mcp-Param-Count":  "42",
		"Mcp-Param-Flag":   "false",
	}
	if got := paramHeaderNames(h); !mapsEqual(got, want) {
		t.Errorf("Mcp-Param headers = %v, want %v", got, want)
	}
	if h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != "valid" {
		t.Errorf("Mcp-Method %q, Mcp-Name %q", h.Get("Mcp-Method"), h.Get("Mcp-Name"))
	}

	// Without the schema nothing is mirrored.
	call(t, c, "valid", headerArgs, nil)
	if got := paramHeaderNames(srv.lastCall(t)); len(got) != 0 {
		t.Errorf("Mcp-Param headers without a schema = %v", got)
	}
}

// In the legacy era the annotations mean nothing: every tool is listed
// and no Mcp-Param-* header is sent.
func TestLegacyIgnoresParamHeaders(t *testing.T) {
	t.Parallel()
	srv := &headerServer{}
	c := connect(t, mcpclient.Spec{Server: "headers-legacy", Transport: mcpclient.TransportHTTP, URL: newStreamableServer(t, srv).URL})
	if era := c.ServerInfo().Era; era != mcpclient.EraLegacy {
		t.Fatalf("era = %q", era)
	}
	tools := listTools(t, c)
	if len(tools) != 6 {
		t.Fatalf("tools = %v, want all six", toolNames(tools))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CallTool(ctx, "valid", json.RawMessage(headerArgs), &mcpclient.CallOptions{InputSchema: findTool(t, tools, "valid").InputSchema}); err != nil {
		t.Fatal(err)
	}
	if got := paramHeaderNames(srv.lastCall(t)); len(got) != 0 {
		t.Errorf("Mcp-Param headers in the legacy era = %v", got)
	}
}
