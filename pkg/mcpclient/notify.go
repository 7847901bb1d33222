package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
)

// Server notifications other than progress (progress.go):
//
//   - notifications/{tools,prompts,resources}/list_changed go to
//     Spec.OnListChanged, whichever stream they came on.
//   - notifications/message (logging) goes to the call that asked for it
//     (CallOptions.Log), and only when it is known to be that call's: over
//     streamable HTTP when it arrives on that request's own response
//     stream (read off the body as mcp-go reads it, logTee) while every
//     request in flight on the connection has the same owner (CallOptions.Owner:
//     an upstream that writes a session's notifications onto whichever
//     response is open, as mcp-go's server does, can then mix only one
//     owner's calls); over stdio, the legacy SSE transport and a legacy
//     HTTP session's GET stream (where mcp-go's server sends a call's
//     messages when one is open), which are no request's own, only while
//     that call is the one request in flight. Anything else is dropped. A message below the call's
//     level or larger than MaxLogMessageBytes is dropped too.
//   - A legacy server that declared logging gets logging/setLevel before a
//     call asking for a more verbose level than it was last given; a
//     modern one gets the call's level in _meta.

//   - list_changed outside a request: a legacy HTTP server sends it on
//     the session's GET stream, which the transport keeps open when
//     Spec.OnListChanged is set; a modern server (HTTP or stdio) only on a
//     subscriptions/listen stream, which the client opens after connecting
//     when the server declared a listChanged capability
//     (listenForChanges). stdio and SSE have one stream for everything.

// LogLevels are MCP's log levels (syslog's), least severe first.
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// LogLevelRank is level's index in LogLevels, -1 for an unknown level.
func LogLevelRank(level string) int { return slices.Index(LogLevels, level) }

// MaxLogMessageBytes bounds one notifications/message's params handed to a
// LogFunc; larger ones are dropped.
const MaxLogMessageBytes = 16 << 10

// LogFunc receives the params of one notifications/message the server
// sent during a call, as the server sent them. It runs on a transport
// goroutine, in the order the server sent them: it must not block for long
// and must never call back into the Client.
type LogFunc func(params json.RawMessage)

// logCall is one call asking for log messages.
type logCall struct {
	rank int
	fn   LogFunc
}

// newLogCall is the log call of a request asking for level and above
// (one of LogLevels) with fn; nil when it asks for none.
func newLogCall(level string, fn LogFunc) *logCall {
	rank := LogLevelRank(level)
	if rank < 0 || fn == nil {
		return nil
	}
	return &logCall{rank: rank, fn: fn}
}

// logRouter counts the requests in flight per owner and the log calls
// among them.
type logRouter struct {
	mu       sync.Mutex
	total    int
	owners   map[string]int
	calls    map[*logCall]string // → owner
	levelMu  sync.Mutex
	upstream int // the level last set on a legacy server (rank+1; 0: none)
}

// begin counts one request of ctx in flight; the func ends it.
func (r *logRouter) begin(ctx context.Context) func() {
	x := exchangeOf(ctx)
	owner, lc := x.owner, x.log
	r.mu.Lock()
	if r.owners == nil {
		r.owners, r.calls = map[string]int{}, map[*logCall]string{}
	}
	r.total++
	r.owners[owner]++
	if lc != nil {
		r.calls[lc] = owner
	}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.total--
		if r.owners[owner]--; r.owners[owner] <= 0 {
			delete(r.owners, owner)
		}
		if lc != nil {
			delete(r.calls, lc)
		}
		r.mu.Unlock()
	}
}

// sole is the log call that is the one request in flight, or nil.
func (r *logRouter) sole() *logCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total != 1 {
		return nil
	}
	for lc := range r.calls {
		return lc
	}
	return nil
}

// mine reports that lc is in flight and every request in flight is its
// owner's.
func (r *logRouter) mine(lc *logCall) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	owner, ok := r.calls[lc]
	return ok && len(r.owners) == 1 && r.owners[owner] == r.total
}

// deliver hands params to lc when they are at or above its level and not
// too large.
func (lc *logCall) deliver(params json.RawMessage) {
	if len(params) > MaxLogMessageBytes {
		return
	}
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(params, &p) != nil || LogLevelRank(p.Level) < lc.rank {
		return
	}
	lc.fn(params)
}

// listNames maps a list_changed method to its list.
var listNames = map[string]string{
	string(mcp.MethodNotificationToolsListChanged):     "tools",
	string(mcp.MethodNotificationPromptsListChanged):   "prompts",
	string(mcp.MethodNotificationResourcesListChanged): "resources",
}

// dispatch is the client's notification handler (every transport).
func (c *Client) dispatch(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationProgress):
		c.progress.dispatch(n)
	case string(mcp.MethodNotificationMessage):
		if c.kind == TransportHTTP {
			return // read off the request's own stream (logTee)
		}
		if lc := c.logs.sole(); lc != nil {
			if b, err := json.Marshal(n.Params); err == nil {
				lc.deliver(b)
			}
		}
	case "notifications/subscriptions/acknowledged":
		if !c.resListen.acknowledged(n) {
			c.acknowledged()
		}
	default:
		if list, ok := listNames[n.Method]; ok && c.onListChanged != nil {
			c.onListChanged(list)
		}
	}
}

// askLevel makes a legacy server that declared logging send log messages
// at lc's level: logging/setLevel when it was last given a less verbose
// one (or none). A failure is logged, and the call goes on.
func (c *Client) askLevel(ctx context.Context, lc *logCall) {
	if c.modern || !c.info.Logging {
		return
	}
	c.logs.levelMu.Lock()
	defer c.logs.levelMu.Unlock()
	if c.logs.upstream > 0 && c.logs.upstream-1 <= lc.rank {
		return
	}
	if _, _, err := c.send(ctx, string(mcp.MethodSetLogLevel), map[string]any{"level": LogLevels[lc.rank]}); err != nil {
		c.logger.Debug("mcp server refused logging/setLevel", "error", err)
		return
	}
	c.logs.upstream = lc.rank + 1
}

// logTee reads the notifications/message events of one request's SSE
// response as mcp-go reads the body, and hands them to the request's log
// call (logRouter.mine permitting); on the session's GET stream (lc nil)
// to the one request in flight when it is a log call (logRouter.sole). Events larger than
// MaxLogMessageBytes are skipped without being buffered.
type logTee struct {
	lc     *logCall
	router *logRouter
	line   []byte
	data   []byte
	over   bool // the current event crossed the cap
}

// bufCap bounds the bytes a logTee holds for one event.
const bufCap = MaxLogMessageBytes + 1024

// feed parses p, a chunk of the body.
func (t *logTee) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.appendLine(p)
			return
		}
		t.appendLine(p[:i])
		t.endLine()
		p = p[i+1:]
	}
}

func (t *logTee) appendLine(b []byte) {
	if t.over {
		return
	}
	if len(t.line)+len(b) > bufCap {
		t.over = true
		t.line = t.line[:0]
		return
	}
	t.line = append(t.line, b...)
}

func (t *logTee) endLine() {
	line := bytes.TrimSuffix(t.line, []byte("\r"))
	switch {
	case len(line) == 0:
		if !t.over && len(t.data) > 0 {
			t.event(t.data)
		}
		t.data, t.over = t.data[:0], false
	case !t.over && bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
		if len(t.data) > 0 {
			t.data = append(t.data, '\n')
		}
		if len(t.data)+len(v) > bufCap {
			t.over = true
		} else {
			t.data = append(t.data, v...)
		}
	}
	t.line = t.line[:0]
}

// event handles one complete event's data.
func (t *logTee) event(data []byte) {
	if !bytes.Contains(data, []byte(mcp.MethodNotificationMessage)) {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil || len(m.ID) > 0 || m.Method != string(mcp.MethodNotificationMessage) || !strings.HasPrefix(string(bytes.TrimSpace(m.Params)), "{") {
		return
	}
	if t.lc == nil {
		// The session's GET stream: the one call in flight's, if any.
		if lc := t.router.sole(); lc != nil {
			lc.deliver(m.Params)
		}
		return
	}
	if t.router.mine(t.lc) {
		t.lc.deliver(m.Params)
	}
}

// backgroundKey marks the ctx of a request that is not a call (the modern
// listen): it does not count as in flight for log routing.
type backgroundKey struct{}

// listenForChanges opens, for a modern connection with Spec.OnListChanged
// whose server declared listChanged for a list, one subscriptions/listen
// for those lists, held until Close. It returns once the server
// acknowledged it (so a change right after Connect is seen), the listen
// ended, or ctx (Connect's) ended.
func (c *Client) listenForChanges(ctx context.Context, caps mcp.ServerCapabilities) {
	if !c.modern || c.onListChanged == nil {
		return
	}
	filter := map[string]bool{}
	if caps.Tools != nil && caps.Tools.ListChanged {
		filter["toolsListChanged"] = true
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		filter["promptsListChanged"] = true
	}
	if caps.Resources != nil && caps.Resources.ListChanged {
		filter["resourcesListChanged"] = true
	}
	if len(filter) == 0 {
		return
	}
	c.listFilter = filter
	life := context.WithValue(c.life, backgroundKey{}, true)
	ack, ended := make(chan struct{}), make(chan struct{})
	c.listenAck.Store(&ack)
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer close(ended)
		_, _, err := c.send(life, string(mcp.MethodSubscriptionsListen), map[string]any{"notifications": filter})
		if life.Err() == nil {
			c.logger.Info("mcp server ended the subscriptions/listen stream; its list changes are no longer seen", "error", err)
		}
	}()
	select {
	case <-ack:
	case <-ended:
	case <-ctx.Done():
	}
}

// acknowledged handles notifications/subscriptions/acknowledged.
func (c *Client) acknowledged() {
	if p := c.listenAck.Swap(nil); p != nil {
		close(*p)
	}
}

// listenGate holds a legacy HTTP session's GET stream (mcp-go's
// continuous listening) until the handshake: a server that declared a
// listChanged gets it; for any other the request waits, unsent, until
// the client closes (so servers that announce nothing see no GET, and
// mcp-go's listener logs nothing). A resumption GET (Last-Event-ID) is
// never held.
type listenGate struct {
	done    chan struct{}
	allowed atomic.Bool
	once    sync.Once
}

// decide opens the gate (allow) or keeps the stream waiting.
func (g *listenGate) decide(allow bool) {
	if g == nil {
		return
	}
	g.once.Do(func() {
		g.allowed.Store(allow)
		close(g.done)
	})
}

// wait returns nil once the stream may be opened, ctx's error otherwise.
func (g *listenGate) wait(ctx context.Context) error {
	select {
	case <-g.done:
		if g.allowed.Load() {
			return nil
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	<-ctx.Done()
	return ctx.Err()
}

// announcesUpdates reports a server that declared resources.subscribe.
func announcesUpdates(caps mcp.ServerCapabilities) bool {
	return caps.Resources != nil && caps.Resources.Subscribe
}

// announcesChanges reports a server that declared listChanged for a list.
func announcesChanges(caps mcp.ServerCapabilities) bool {
	return (caps.Tools != nil && caps.Tools.ListChanged) || (caps.Prompts != nil && caps.Prompts.ListChanged) ||
		(caps.Resources != nil && caps.Resources.ListChanged)
}
