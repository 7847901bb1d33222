package discovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// fedFake serves a tool, the resource res://x, the template res://{id}
// and the prompt hello over streamable HTTP; a request for a method in
// failing gets HTTP 500.
func fedFake(t *testing.T, failing ...string) string {
	t.Helper()
	s := server.NewMCPServer("fedfake", "1", server.WithToolCapabilities(false), server.WithResourceCapabilities(false, false), server.WithPromptCapabilities(false))
	s.AddTool(mcp.NewTool("t"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	s.AddResource(mcp.NewResource("res://x", "x"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) { return nil, nil })
	s.AddResourceTemplate(mcp.NewResourceTemplate("res://{id}", "byid"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) { return nil, nil })
	s.AddPrompt(mcp.NewPrompt("hello"), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) { return nil, nil })
	inner := server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20251125))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &msg)
			for _, m := range failing {
				if msg.Method == m {
					http.Error(w, "this list is broken", http.StatusInternalServerError)
					return
				}
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// TestFederatedListsWithTheTools: discovery lists a server's prompts,
// resources and templates with its tools, named like its tools and with
// visible URIs; a failed prompts/list keeps the server's tools and its
// other lists, and reports the server in that list's failed_servers and
// its status only.
func TestFederatedListsWithTheTools(t *testing.T) {
	t.Parallel()
	good, broken := fedFake(t), fedFake(t, "prompts/list")
	b := start(t, `{"mcpServers": {"good": `+httpServer(good, "")+`, "broken": `+httpServer(broken, "")+`}}`)
	r := mustList(t, b)
	if !hasTool(r, "good_t") || !hasTool(r, "broken_t") {
		t.Fatalf("tools: %v", names(r))
	}
	ctx := context.Background()
	req := bus.FedListRequest{}
	prompts, err := bus.Request[bus.PromptsListReply](ctx, b.NC, b.Names.PromptsList(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "good_hello" || prompts.Prompts[0].OriginalName != "hello" || prompts.Prompts[0].Server != "good" {
		t.Errorf("prompts: %+v", prompts.Prompts)
	}
	if len(prompts.FailedServers) != 1 || prompts.FailedServers[0].Server != "broken" || !strings.Contains(prompts.FailedServers[0].Error, "prompts/list") {
		t.Errorf("prompts failed_servers: %+v", prompts.FailedServers)
	}
	res, err := bus.Request[bus.ResourcesListReply](ctx, b.NC, b.Names.ResourcesList(), req)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, x := range res.Resources {
		uris = append(uris, x.URI)
	}
	if strings.Join(uris, " ") != "mcpbus://good/res://x mcpbus://broken/res://x" || len(res.FailedServers) != 0 {
		t.Errorf("resources: %v, failed %+v", uris, res.FailedServers)
	}
	tpl, err := bus.Request[bus.ResourceTemplatesListReply](ctx, b.NC, b.Names.ResourceTemplatesList(), bus.FedListRequest{PageSize: 1})
	if err != nil || len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != "mcpbus://good/res://{id}" || tpl.NextCursor == "" {
		t.Fatalf("templates, first page: %+v %v", tpl, err)
	}
	next, err := bus.Request[bus.ResourceTemplatesListReply](ctx, b.NC, b.Names.ResourceTemplatesList(), bus.FedListRequest{PageSize: 1, Cursor: tpl.NextCursor})
	if err != nil || len(next.ResourceTemplates) != 1 || next.ResourceTemplates[0].URITemplate != "mcpbus://broken/res://{id}" || next.NextCursor != "" || next.Revision != tpl.Revision {
		t.Errorf("templates, second page: %+v %v", next, err)
	}
	st := servers(t, b, bus.ServersRequest{NoRefresh: true})
	for _, s := range st.Servers {
		switch {
		case s.Name == "broken" && (s.State != bus.ServerStateOK || !strings.Contains(s.LastError, "prompts/list") || s.ResourceCount != 1):
			t.Errorf("broken's status: %+v", s)
		case s.Name == "good" && (s.LastError != "" || s.PromptCount != 1 || s.ResourceCount != 1 || s.ResourceTemplateCount != 1):
			t.Errorf("good's status: %+v", s)
		}
	}
	clashes := 0
	for _, c := range st.Clashes {
		if c.Kind == "resource" && c.Name == "res://x" && c.Winner == "good" && c.Loser == "broken" {
			clashes++
		}
	}
	if clashes != 1 {
		t.Errorf("the same raw URI is reported once: %+v", st.Clashes)
	}
}
