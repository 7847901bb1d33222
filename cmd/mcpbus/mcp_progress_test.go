package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// progressLog collects the notifications/progress a client receives.
type progressLog struct {
	mu   sync.Mutex
	seen map[string][]string // token -> "progress/total message"
}

func watchProgress(c *client.Client) *progressLog {
	l := &progressLog{seen: map[string][]string{}}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		f := n.Params.AdditionalFields
		tok := fmt.Sprint(f["progressToken"])
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen[tok] = append(l.seen[tok], fmt.Sprintf("%v/%v %v", f["progress"], f["total"], f["message"]))
	})
	return l
}

func (l *progressLog) of(token string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen[token])
}

// checkProgress calls tool (the demo's progress tool) with a progress
// token: the upstream's notifications arrive before the result, in order,
// with the client's token, and the result's _meta passes through.
func checkProgress(t *testing.T, c *client.Client, l *progressLog, tool, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, map[string]any{"steps": 3}
	req.Params.Meta = &mcp.Meta{ProgressToken: token}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	want := []string{"1/3 step 1 of 3", "2/3 step 2 of 3", "3/3 step 3 of 3"}
	if got := l.of(token); !slices.Equal(got, want) {
		t.Errorf("%s: progress before the result = %q, want %q", tool, got, want)
	}
	if res.Meta == nil || fmt.Sprint(res.Meta.AdditionalFields["demo/steps"]) != "3" {
		t.Errorf("%s: result _meta = %+v, want demo/steps 3", tool, res.Meta)
	}
}

// cancelCounts are the demo server's cancellation counts.
type cancelCounts struct {
	Blocked  int `json:"blocked_cancelled"`
	Notified int `json:"cancel_notifications"`
	InFlight int `json:"in_flight"`
}

// cancellations reads the demo server's cancellation counts.
func cancellations(t *testing.T, c *client.Client, tool string) cancelCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = tool
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %v", tool, err, res)
	}
	var r cancelCounts
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func whoamiPid(t *testing.T, c *client.Client, tool string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = tool
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %v", tool, err, res)
	}
	var id struct {
		Pid int `json:"pid"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &id); err != nil || id.Pid == 0 {
		t.Fatalf("%s: %s %v", tool, b, err)
	}
	return id.Pid
}

// checkCancel starts server's block tool under JSON-RPC id reqID and,
// once the upstream runs it, sends one notifications/cancelled for it: the
// upstream sees its call cancelled and receives a notifications/cancelled
// of its own, the call ends with the cancellation error, and the session
// (for stdio, the same process) keeps serving.
func checkCancel(t *testing.T, c *client.Client, server, reqID string) {
	t.Helper()
	pid := whoamiPid(t, c, server+"_whoami")
	before := cancellations(t, c, server+"_cancellations")
	type outcome struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
		defer cancel()
		resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
			ID: mcp.NewRequestId(reqID), Method: "tools/call", Params: map[string]any{"name": server + "_block"}})
		done <- outcome{resp, err}
	}()
	testkit.Eventually(t, 60*time.Second, server+": the upstream to run the block call", func() bool {
		return cancellations(t, c, server+"_cancellations").InFlight > before.InFlight
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": reqID, "reason": "test"}}}}); err != nil {
		t.Fatalf("send notifications/cancelled: %v", err)
	}
	select {
	case o := <-done:
		if o.err != nil || o.resp == nil || o.resp.Error == nil || o.resp.Error.Code != -32800 {
			t.Errorf("%s: cancelled call answered %+v %v, want error -32800", server, o.resp, o.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the cancelled call never ended", server)
	}
	testkit.Eventually(t, 60*time.Second, server+": the upstream to see its block call cancelled", func() bool {
		after := cancellations(t, c, server+"_cancellations")
		// The HTTP upstream (demohttp) speaks 2026-07-28: the aborted POST
		// is its cancellation, with no notifications/cancelled.
		return after.Blocked > before.Blocked && (server == "demohttp" || after.Notified > before.Notified)
	})
	if after := whoamiPid(t, c, server+"_whoami"); after != pid {
		t.Errorf("%s: the session did not survive the cancellation: pid %d, then %d", server, pid, after)
	}
}

// TestMCPProgressAndCancellation: over /mcp (mcp-go's streamable HTTP
// client), /sse and `mcpbus stdio`, a call with a progress token gets the
// upstream's notifications/progress in order before its result, and a
// notifications/cancelled from the client cancels the upstream call, for a
// stdio and an HTTP upstream; result _meta passes through.
func TestMCPProgressAndCancellation(t *testing.T) {
	t.Parallel()
	st := startMCPStack(t)

	tr, err := transport.NewStreamableHTTP(st.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + mcpAliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	alice := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = alice.Close() })
	if err := alice.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := watchProgress(alice)
	initialized(t, alice, mcp.ProtocolVersion20251125)
	testkit.Eventually(t, 60*time.Second, "both servers in alice's catalog", func() bool {
		names := listedNames(t, alice)
		return slices.Contains(names, "demo_progress") && slices.Contains(names, "demohttp_progress")
	})
	checkProgress(t, alice, log, "demo_progress", "http-stdio")
	checkProgress(t, alice, log, "demohttp_progress", "http-http")
	checkCancel(t, alice, "demo", "cancel-stdio")
	checkCancel(t, alice, "demohttp", "cancel-http")

	// The 2024-11-05 transport: progress arrives on the session's /sse
	// stream, whichever request it belongs to.
	sse, err := client.NewSSEMCPClient(st.base+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + mcpAliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sse.Close() })
	if err := sse.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sseLog := watchProgress(sse)
	initialized(t, sse, mcp.ProtocolVersion20241105)
	checkProgress(t, sse, sseLog, "demohttp_progress", "sse-http")

	stdio := mcpbusStdio(t, st.dir, st.natsURL, "alice", "progress")
	slog := watchProgress(stdio)
	initialized(t, stdio, mcp.ProtocolVersion20251125)
	checkProgress(t, stdio, slog, "demo_progress", "stdio-stdio")
	checkProgress(t, stdio, slog, "demohttp_progress", "stdio-http")
	checkCancel(t, stdio, "demo", "cancel-stdio")
}
