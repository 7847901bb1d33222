package mcpclient

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// ProgressFunc receives the params of one notifications/progress the
// server sent for a call, progressToken removed. It runs on the
// transport's reader goroutine, in the order the server sent them: it must
// not block for long and must never call back into the Client.
type ProgressFunc func(params json.RawMessage)

// progressRouter hands progress notifications to the call whose token
// they carry.
type progressRouter struct {
	mu    sync.Mutex
	seq   uint64
	calls map[string]ProgressFunc
}

// add registers fn under a fresh token; remove unregisters it.
func (r *progressRouter) add(fn ProgressFunc) (token string, remove func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	token = "mcpbus-progress-" + strconv.FormatUint(r.seq, 10)
	if r.calls == nil {
		r.calls = map[string]ProgressFunc{}
	}
	r.calls[token] = fn
	return token, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.calls, token)
	}
}

// dispatch is the client's notification handler.
func (r *progressRouter) dispatch(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationProgress) {
		return
	}
	fields := n.Params.AdditionalFields
	token := tokenString(fields["progressToken"])
	r.mu.Lock()
	fn := r.calls[token]
	r.mu.Unlock()
	if fn == nil {
		return
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		if k != "progressToken" {
			out[k] = v
		}
	}
	if len(n.Params.Meta) > 0 {
		out["_meta"] = n.Params.Meta
	}
	b, err := json.Marshal(out)
	if err != nil {
		return
	}
	fn(b)
}

// tokenString is a progress token (a string or a number) as a map key.
func tokenString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}
