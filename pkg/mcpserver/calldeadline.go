package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// callGrace is how long past a tool's timeout a tools/call waits for
// toolcall's reply: toolcall ends the upstream call at the timeout and
// answers with its own error, which needs the time to come back (the
// REST call path's timeout_ms has the same margin).
const callGrace = 2 * time.Second

// maxCallTimeouts bounds callTimeouts: past it the map starts over.
const maxCallTimeouts = 1 << 14

// callTimeouts remembers, per caller and tool, the tool's timeout as the
// catalogs this replica read give it (bus.Tool.TimeoutMS), so a tools/call
// waits for its reply as long as the tool may run (plus callGrace) rather
// than the bound on every bus request (Config.RequestTimeout): a call that
// no toolcall replica answers (its request lost with a cut-off NATS node,
// the replica gone) ends at its own timeout. A tool not seen in a catalog
// yet, or without a timeout, waits RequestTimeout.
type callTimeouts struct {
	mu sync.Mutex
	ms map[string]int64 // user NUL tool → milliseconds
}

func callTimeoutKey(user, tool string) string { return user + "\x00" + tool }

// learn records the timeouts of user's catalog tools.
func (c *callTimeouts) learn(user string, tools []bus.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ms == nil || len(c.ms)+len(tools) > maxCallTimeouts {
		c.ms = make(map[string]int64, len(tools))
	}
	for _, t := range tools {
		if t.TimeoutMS > 0 {
			c.ms[callTimeoutKey(user, t.Name)] = t.TimeoutMS
		} else {
			delete(c.ms, callTimeoutKey(user, t.Name))
		}
	}
}

// of is the timeout of user's tool, 0 when none is known.
func (c *callTimeouts) of(user, tool string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.ms[callTimeoutKey(user, tool)]) * time.Millisecond
}

// callCtx bounds one mcpbus.tools.call of x's tool by the tool's timeout
// plus callGrace, within ctx (busCtx's RequestTimeout); timeout is 0 when
// the tool has none known (ctx alone bounds the call).
func (s *Server) callCtx(ctx context.Context, x *Exchange, tool string) (_ context.Context, _ context.CancelFunc, timeout time.Duration) {
	timeout = s.callTimeouts.of(x.UserID, tool)
	if timeout <= 0 {
		return ctx, func() {}, 0
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+callGrace)
	return cctx, cancel, timeout
}

// callWaitError names the tool and its timeout when a tools/call gave up
// waiting for toolcall's reply at the tool's timeout (cctx ended, not the
// caller's request); other errors, toolcall's own timeout among them, pass
// as they are.
func callWaitError(ctx, cctx context.Context, err error, tool string, timeout time.Duration) error {
	if timeout <= 0 || ctx.Err() != nil || !errors.Is(cctx.Err(), context.DeadlineExceeded) || bus.AsError(err).Code != bus.CodeUpstreamTimeout {
		return err
	}
	return bus.Wrap(bus.CodeUpstreamTimeout, err, fmt.Sprintf(
		"tool '%s': no mcpbus replica answered within the tool's timeout (%d ms)", tool, timeout.Milliseconds()))
}
