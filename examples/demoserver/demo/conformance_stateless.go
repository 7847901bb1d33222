package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The conformance fixture's diagnostic tools of the server-stateless and
// http-custom-header-server-validation scenarios (0.2.0-alpha.12).

// addDiagnosticTools registers test_logging_tool, test_trigger_tool_change,
// test_trigger_prompt_change and test_custom_header.
func addDiagnosticTools(s *server.MCPServer) {
	// test_logging_tool logs three lines; mcp-go sends a 2026-07-28
	// request's only when its _meta asks for a log level.
	s.AddTool(mcp.NewTool("test_logging_tool", mcp.WithDescription("Logs three info lines (sent only when the request's _meta sets a log level).")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv := server.ServerFromContext(ctx)
			for _, msg := range []string{"logging tool started", "logging tool working", "logging tool done"} {
				_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "conformance", msg))
			}
			SettleNotifications(ctx)
			return mcp.NewToolResultText("Logging tool executed"), nil
		})

	// The triggers add or remove one extra tool (prompt), so every call
	// changes the list and mcp-go sends notifications/*/list_changed.
	var mu sync.Mutex
	dynamicTool, dynamicPrompt := false, false
	s.AddTool(mcp.NewTool("test_trigger_tool_change", mcp.WithDescription("Adds or removes the tool test_dynamic_tool (tools/list changes).")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if dynamicTool = !dynamicTool; dynamicTool {
				s.AddTool(mcp.NewTool("test_dynamic_tool", mcp.WithDescription("Present every other test_trigger_tool_change.")),
					func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return mcp.NewToolResultText("dynamic"), nil
					})
				return mcp.NewToolResultText("test_dynamic_tool added"), nil
			}
			s.DeleteTools("test_dynamic_tool")
			return mcp.NewToolResultText("test_dynamic_tool removed"), nil
		})
	s.AddTool(mcp.NewTool("test_trigger_prompt_change", mcp.WithDescription("Adds or removes the prompt test_dynamic_prompt (prompts/list changes).")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if dynamicPrompt = !dynamicPrompt; dynamicPrompt {
				s.AddPrompt(mcp.NewPrompt("test_dynamic_prompt", mcp.WithPromptDescription("Present every other test_trigger_prompt_change.")),
					func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
						return mcp.NewGetPromptResult("dynamic", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("dynamic"))}), nil
					})
				return mcp.NewToolResultText("test_dynamic_prompt added"), nil
			}
			s.DeletePrompts("test_dynamic_prompt")
			return mcp.NewToolResultText("test_dynamic_prompt removed"), nil
		})

	// test_custom_header's region travels in Mcp-Param-Region too
	// (SEP-2243); mcp-go checks the header against the body.
	s.AddTool(mcp.NewToolWithRawSchema("test_custom_header", "Echoes its region, an argument mirrored in the Mcp-Param-Region header.", json.RawMessage(`{
		"type": "object",
		"properties": {"region": {"type": "string", "description": "a region name", "x-mcp-header": "Region"}},
		"required": ["region"]
	}`)), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("region: " + req.GetString("region", "")), nil
	})
}

// ConformanceHTTP puts the fixture's one answer mcp-go's server cannot give
// in front of next: a 2026-07-28 tools/call of test_missing_capability
// whose _meta does not declare the sampling capability is refused with
// HTTP 400 and JSON-RPC -32021 whose data.requiredCapabilities is
// {"sampling": {}} (a tool handler's error is always -32603 there).
func ConformanceHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
				Meta struct {
					Version      string                     `json:"io.modelcontextprotocol/protocolVersion"`
					Capabilities map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodToolsCall) || msg.Params.Name != "test_missing_capability" ||
			!mcp.IsModernProtocol(msg.Params.Meta.Version) || msg.Params.Meta.Capabilities == nil {
			next.ServeHTTP(w, r)
			return
		}
		if _, ok := msg.Params.Meta.Capabilities["sampling"]; ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
			"code":    mcp.MISSING_REQUIRED_CLIENT_CAPABILITY,
			"message": "test_missing_capability needs the sampling client capability, which this request's _meta does not declare",
			"data":    map[string]any{"requiredCapabilities": map[string]any{"sampling": map[string]any{}}},
		}})
	})
}
