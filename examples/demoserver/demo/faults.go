package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// FaultHugeDefaultBytes is the default size of the huge tool's text.
const FaultHugeDefaultBytes = 100 << 20

// Fault tools make the server misbehave the way a broken upstream does; a
// fault suite calls them to check that the gateway answers every call in
// time anyway. They are added only with [Config.Faults]:
//
//   - hang: never answers (ignores cancellation; the process stays up).
//   - crash: the process exits with status 3 in the middle of the call.
//   - malformed: writes lines that are not JSON-RPC replies to
//     [Config.RawOut] (stdout over stdio) before answering normally
//     "survived". Over HTTP the demo command answers the call itself with a
//     truncated JSON body instead (see the command's -faults flag).
//   - huge {bytes (default 100 MiB)}: answers with one text block of that
//     many bytes, so the reply is one line of that size.
func addFaultTools(s *server.MCPServer, rawOut io.Writer) {
	s.AddTool(mcp.NewTool("hang", mcp.WithDescription("Never answers.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {}
		})
	s.AddTool(mcp.NewTool("crash", mcp.WithDescription("Exits the server process mid-call.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "demoserver: crash requested")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(mcp.NewTool("malformed", mcp.WithDescription("Writes garbage JSON-RPC, then answers.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if rawOut != nil {
				for _, line := range []string{
					"this is not json",
					`{"jsonrpc":"2.0","id":`,
					`{"jsonrpc":"2.0","id":{"x":1},"result":{}}`,
					`{"jsonrpc":"1.0","method":42,"params":"x"}`,
					`[1,2,3]`,
					`{"jsonrpc":"2.0","id":999999,"result":{"content":"not a list"}}`,
				} {
					if _, err := io.WriteString(rawOut, line+"\n"); err != nil {
						return nil, err
					}
				}
			}
			return mcp.NewToolResultText("survived"), nil
		})
	s.AddTool(mcp.NewTool("huge", mcp.WithDescription("Answers with one very large text block."),
		mcp.WithNumber("bytes", mcp.DefaultNumber(FaultHugeDefaultBytes), mcp.Min(1), mcp.Max(1<<30))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := req.GetInt("bytes", FaultHugeDefaultBytes)
			if n < 1 || n > 1<<30 {
				return mcp.NewToolResultError("bytes must be between 1 and 1073741824"), nil
			}
			return mcp.NewToolResultText(strings.Repeat("x", n)), nil
		})
}
