package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// NewConformance returns the fixture of the official conformance suite's
// server scenarios (@modelcontextprotocol/conformance 0.1.16 and
// 0.2.0-alpha.12), written from the scenario descriptions: the tools
// test_simple_text, test_image_content, test_audio_content,
// test_embedded_resource, test_multiple_content_types,
// test_tool_with_logging, test_error_handling, test_tool_with_progress,
// test_sampling, test_elicitation, test_elicitation_sep1034_defaults,
// test_elicitation_sep1330_enums, json_schema_2020_12_tool, the
// server-stateless diagnostics (test_logging_tool, test_trigger_tool_change,
// test_trigger_prompt_change, test_streaming_elicitation,
// test_missing_capability), test_custom_header (an x-mcp-header argument)
// and the multi-round-trip tools (conformance_mrtr.go); the resources,
// prompts and completions of conformance_catalog.go. Over HTTP put it
// behind [ConformanceHTTP].
func NewConformance() *server.MCPServer {
	s := server.NewMCPServer("mcpbus-conformance-fixture", Version,
		server.WithToolCapabilities(true), server.WithLogging(), server.WithElicitation(), server.WithRecovery(),
		server.WithResourceCapabilities(true, true), server.WithPromptCapabilities(true),
		server.WithCompletions(), server.WithPromptCompletionProvider(completions{}))
	s.EnableSampling()
	addResources(s)
	addPrompts(s)
	addMRTRTools(s)
	addDiagnosticTools(s)
	noArgs := func(name, desc string) mcp.Tool { return mcp.NewTool(name, mcp.WithDescription(desc)) }

	s.AddTool(noArgs("test_simple_text", "Returns simple text content."), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("This is a simple text response for testing."), nil
	})
	s.AddTool(noArgs("test_image_content", "Returns a 1x1 PNG image."), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(redPixelPNG, "image/png")}}, nil
	})
	s.AddTool(noArgs("test_audio_content", "Returns a short WAV clip."), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent(silentWAV, "audio/wav")}}, nil
	})
	s.AddTool(noArgs("test_embedded_resource", "Returns an embedded text resource."), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."})}}, nil
	})
	s.AddTool(noArgs("test_multiple_content_types", "Returns text, an image and a resource."), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent("Multiple content types test:"),
			mcp.NewImageContent(redPixelPNG, "image/png"),
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}),
		}}, nil
	})
	s.AddTool(noArgs("test_tool_with_logging", "Sends three info log messages while it runs."), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		srv := server.ServerFromContext(ctx)
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				pause(ctx, 50*time.Millisecond)
			}
			_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "conformance", msg))
		}
		SettleNotifications(ctx)
		return mcp.NewToolResultText("Tool with logging executed successfully"), nil
	})
	s.AddTool(noArgs("test_error_handling", "Always fails (isError)."), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("This tool intentionally returns an error for testing"), nil
	})
	s.AddTool(noArgs("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var token mcp.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		srv := server.ServerFromContext(ctx)
		for i, p := range []int{0, 50, 100} {
			if i > 0 {
				pause(ctx, 50*time.Millisecond)
			}
			if token != nil {
				_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{"progressToken": token, "progress": p, "total": 100})
			}
		}
		SettleNotifications(ctx)
		return mcp.NewToolResultText("Tool with progress executed successfully"), nil
	})
	// test_sampling and test_elicitation ask through an input_required
	// result: a 2026-07-28 client answers it and retries, for a legacy one
	// mcp-go sends sampling/createMessage (elicitation/create) itself.
	s.AddTool(mcp.NewTool("test_sampling", mcp.WithDescription("Asks the client's LLM (sampling/createMessage)."),
		mcp.WithString("prompt", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, ok := sampledText(req.Params.InputResponses, "llm")
		if !ok {
			return server.NewInputRequestBuilder("").Sample("llm", askLLM(req.GetString("prompt", ""), 100)).ToolResult(), nil
		}
		return mcp.NewToolResultText("LLM response: " + text), nil
	})
	s.AddTool(mcp.NewTool("test_elicitation", mcp.WithDescription("Asks the user (elicitation/create)."),
		mcp.WithString("message", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := server.ElicitationResponse(req.Params.InputResponses, "user")
		if res == nil {
			return server.NewInputRequestBuilder("").Elicit("user", mcp.ElicitationParams{
				Message: req.GetString("message", ""),
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
					"username": map[string]any{"type": "string", "description": "User's response"},
					"email":    map[string]any{"type": "string", "description": "User's email address"},
				}, "required": []string{"username", "email"}},
			}).ToolResult(), nil
		}
		content, _ := json.Marshal(res.Content)
		return mcp.NewToolResultText(fmt.Sprintf("User response: action=%s, content=%s", res.Action, content)), nil
	})
	// elicitForm is a tool asking for a form (SEP-1034 defaults, SEP-1330
	// enums) that reports what came back, whatever the action.
	elicitForm := func(name, desc string, params mcp.ElicitationParams) {
		s.AddTool(noArgs(name, desc), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res := server.ElicitationResponse(req.Params.InputResponses, "form")
			if res == nil {
				return server.NewInputRequestBuilder("").Elicit("form", params).ToolResult(), nil
			}
			content, _ := json.Marshal(res.Content)
			if res.Content == nil {
				content = []byte("{}")
			}
			return mcp.NewToolResultText(fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, content)), nil
		})
	}
	elicitForm("test_elicitation_sep1034_defaults", "Asks for a form whose fields all have defaults (SEP-1034).", mcp.ElicitationParams{
		Message: "Please review and update the form fields with defaults",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
		}, "required": []string{}},
	})
	titled := func(prefix string, titles ...string) []map[string]any {
		out := make([]map[string]any, len(titles))
		for i, t := range titles {
			out[i] = map[string]any{"const": fmt.Sprintf("value%d", i+1), "title": t + " " + prefix}
		}
		return out
	}
	elicitForm("test_elicitation_sep1330_enums", "Asks for a form with the five enum variants (SEP-1330).", mcp.ElicitationParams{
		Message: "Please select options from the enum fields",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "description": "Select one option", "enum": []string{"option1", "option2", "option3"}},
			"titledSingle":   map[string]any{"type": "string", "description": "Select one option with titles", "oneOf": titled("Option", "First", "Second", "Third")},
			"legacyEnum": map[string]any{"type": "string", "description": "Select one option (legacy)", "enum": []string{"opt1", "opt2", "opt3"},
				"enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti": map[string]any{"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
				"items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
			"titledMulti": map[string]any{"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
				"items": map[string]any{"anyOf": titled("Choice", "First", "Second", "Third")}},
		}, "required": []string{}},
	})
	s.AddTool(mcp.NewToolWithRawSchema("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {
			"name": {"type": "string"},
			"address": {"$ref": "#/$defs/address"},
			"contactMethod": {"type": "string", "enum": ["phone", "email"]},
			"phone": {"type": "string"},
			"email": {"type": "string"}
		},
		"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
		"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
		"then": {"required": ["phone"]},
		"else": {"required": ["email"]},
		"additionalProperties": false
	}`)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	return s
}

// pause waits d or until ctx ends (the scenarios ask for ~50ms between
// notifications).
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// redPixelPNG is a 1x1 red PNG; silentWAV a minimal 8 kHz mono WAV.
const (
	redPixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	silentWAV   = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
)
