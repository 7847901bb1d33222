package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The bridging tools (Config.Bridge, demoserver -bridge): what a gateway
// between MCP eras must carry across.
//
//   - confirm asks the client for a confirmation with an elicitation, the
//     2026-07-28 way: a multi-round-trip result (resultType
//     "input_required", inputRequests {"confirm": elicitation/create} and
//     requestState ConfirmState); the retry's answer is reported as
//     "confirmed: action=… content=… state=…". It asks whatever the client
//     declared (a client without elicitation should be refused by whoever
//     relays it). A legacy-era request gets mcp-go's own bridge: the server
//     sends elicitation/create to the client during the call.
//   - busy sheds load once: its first call answers input_required with
//     requestState BusyState and no input requests (the client may retry
//     at once); a call carrying that state answers "done after a retry".
//     A legacy-era request gets mcp-go's answer for load shedding (an
//     error).
//   - client_capabilities reports the capabilities a 2026-07-28 request
//     declared in its _meta (an empty object for none, "legacy" for a
//     request of the legacy era).

// BusyState is the requestState the busy tool asks to be echoed.
const BusyState = "demo-busy-state-1"

// ConfirmState is the requestState the confirm tool asks to be echoed.
const ConfirmState = "demo-confirm-state-1"

func addBridgeTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("confirm",
		mcp.WithDescription("Asks the user to confirm the message (an elicitation, as a multi-round-trip result), then reports the answer."),
		mcp.WithString("message", mcp.Required()),
	), confirm)
	s.AddTool(mcp.NewTool("busy",
		mcp.WithDescription("Sheds load once: asks to be called again (a multi-round-trip result without input requests), then answers."),
	), busy)
	s.AddTool(mcp.NewTool("client_capabilities",
		mcp.WithDescription("Reports the client capabilities the request declared (2026-07-28 _meta)."),
		readOnly,
	), clientCapabilities)
}

func confirm(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if answer := server.ElicitationResponse(req.Params.InputResponses, "confirm"); answer != nil {
		content, _ := json.Marshal(answer.Content)
		return mcp.NewToolResultText(fmt.Sprintf("confirmed: action=%s content=%s state=%s", answer.Action, content, req.Params.RequestState)), nil
	}
	return server.NewInputRequestBuilder(ConfirmState).Elicit("confirm", mcp.ElicitationParams{
		Message: "Confirm: " + msg,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"ok": map[string]any{"type": "boolean"},
		}, "required": []string{"ok"}},
	}).ToolResult(), nil
}

func busy(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if req.Params.RequestState == BusyState {
		return mcp.NewToolResultText("done after a retry"), nil
	}
	return server.NewInputRequestBuilder(BusyState).ToolResult(), nil
}

func clientCapabilities(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	info := server.RequestProtocolInfoFromContext(ctx)
	if info == nil || !info.Modern {
		return mcp.NewToolResultText("legacy"), nil
	}
	b, err := json.Marshal(info.ClientCapabilities)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(string(b)), nil
}
