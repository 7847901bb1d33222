package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// MaxProgressSteps bounds the progress tool's steps argument.
const MaxProgressSteps = 100

// blockLimit is how long the block tool waits for a cancellation.
const blockLimit = 120 * time.Second

// Cancellations counts what the server saw of cancellation: block calls
// whose context ended, and notifications/cancelled messages that reached
// the transport (counted by Watch and WatchReader, which wrap the HTTP
// handler or stdin). Safe for concurrent use.
type Cancellations struct {
	blocked  atomic.Int64
	notified atomic.Int64
	inFlight atomic.Int64
}

// InFlight is how many block calls are waiting now.
func (c *Cancellations) InFlight() int64 { return c.inFlight.Load() }

// CancellationReport is the cancellations tool's structured output.
type CancellationReport struct {
	// BlockedCancelled counts block calls whose context ended.
	BlockedCancelled int64 `json:"blocked_cancelled"`
	// CancelNotifications counts notifications/cancelled received.
	CancelNotifications int64 `json:"cancel_notifications"`
	// InFlight counts block calls waiting now.
	InFlight int64 `json:"in_flight"`
}

// Watch counts the notifications/cancelled POSTed to h.
func (c *Cancellations) Watch(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "cannot read the body", http.StatusBadRequest)
				return
			}
			c.see(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// WatchReader counts the notifications/cancelled lines read through r
// (the stdio transport's stdin).
func (c *Cancellations) WatchReader(r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			c.see(line)
			if _, err := pw.Write(append(line, '\n')); err != nil {
				return
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr
}

func (c *Cancellations) see(msg []byte) {
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(msg, &m) == nil && m.Method == string(mcp.MethodNotificationCancelled) {
		c.notified.Add(1)
	}
}

func addProgressTools(s *server.MCPServer, c *Cancellations) {
	s.AddTool(mcp.NewTool("progress",
		mcp.WithDescription("Sends one notifications/progress per step (when the call has a progressToken), then answers with _meta {\"demo/steps\": steps}."),
		mcp.WithNumber("steps", mcp.DefaultNumber(3), mcp.Min(0), mcp.Max(MaxProgressSteps)),
	), progress)
	s.AddTool(mcp.NewTool("block",
		mcp.WithDescription("Waits until the call is cancelled (at most 120s)."),
	), c.block)
	s.AddTool(mcp.NewTool("cancellations",
		mcp.WithDescription("Reports how many block calls were cancelled, how many notifications/cancelled arrived and how many block calls wait now."),
		mcp.WithOutputSchema[CancellationReport](),
		readOnly,
	), c.report)
}

func progress(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps := int(req.GetFloat("steps", 3))
	if steps < 0 || steps > MaxProgressSteps {
		return mcp.NewToolResultError(fmt.Sprintf("steps must be between 0 and %d", MaxProgressSteps)), nil
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	if token != nil {
		srv := server.ServerFromContext(ctx)
		for i := 1; i <= steps; i++ {
			if err := srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d of %d", i, steps),
			}); err != nil {
				return nil, fmt.Errorf("send progress: %w", err)
			}
		}
		SettleNotifications(ctx)
	}
	res := mcp.NewToolResultText(fmt.Sprintf("done after %d steps", steps))
	res.Meta = mcp.NewMetaFromMap(map[string]any{"demo/steps": steps})
	return res, nil
}

func (c *Cancellations) block(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	timer := time.NewTimer(blockLimit)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		c.blocked.Add(1)
		return nil, ctx.Err()
	case <-timer.C:
		return mcp.NewToolResultText("not cancelled"), nil
	}
}

func (c *Cancellations) report(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r := CancellationReport{BlockedCancelled: c.blocked.Load(), CancelNotifications: c.notified.Load(), InFlight: c.inFlight.Load()}
	text, _ := json.Marshal(r)
	return mcp.NewToolResultStructured(r, string(text)), nil
}

// SettleNotifications waits until the session's queued notifications are written: the
// mcp-go server writes notifications from a goroutine of its own and the
// response from the handler's, so without this the progress could follow
// the result. It waits for the queue to empty, then a little more for the
// write of the one taken last (bounded; a fixture's best effort).
func SettleNotifications(ctx context.Context) {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil {
		return
	}
	ch := sess.NotificationChannel()
	for deadline := time.Now().Add(time.Second); len(ch) > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}
