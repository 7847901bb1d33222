package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The logging tool (Config.Logging, the -logging flag): log_levels sends
// notifications/message at every level while it runs, each message's data
// naming the caller's tag, so a test can tell whose messages reached whom
// and at which levels.

// logLevels are MCP's levels, least severe first.
var logLevels = []mcp.LoggingLevel{mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelNotice, mcp.LoggingLevelWarning,
	mcp.LoggingLevelError, mcp.LoggingLevelCritical, mcp.LoggingLevelAlert, mcp.LoggingLevelEmergency}

// addLoggingTools registers log_levels.
func addLoggingTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("log_levels",
		mcp.WithDescription("Sends rounds of log messages, one per level (debug to emergency), data \"<tag> <level> <round>\", then answers."),
		mcp.WithString("tag", mcp.Required(), mcp.Description("Text every message's data starts with.")),
		mcp.WithNumber("rounds", mcp.Description("Rounds of messages (default 1, at most 100).")),
		mcp.WithNumber("gap_ms", mcp.Description("Pause between rounds in milliseconds (default 0, at most 1000).")),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tag := req.GetString("tag", "")
		rounds := min(max(req.GetInt("rounds", 1), 1), 100)
		gap := time.Duration(min(max(req.GetInt("gap_ms", 0), 0), 1000)) * time.Millisecond
		srv := server.ServerFromContext(ctx)
		for r := range rounds {
			if r > 0 && gap > 0 {
				pause(ctx, gap)
			}
			for _, l := range logLevels {
				_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(l, "demo", fmt.Sprintf("%s %s %d", tag, l, r)))
			}
		}
		SettleNotifications(ctx)
		return mcp.NewToolResultText(fmt.Sprintf("logged %d rounds", rounds)), nil
	})
}
