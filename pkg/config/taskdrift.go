package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// InterceptorsKey names the interceptor chain among a task server's
// restart fields.
const InterceptorsKey = "mcpInterceptors"

// TaskDrift is a task-enabled server whose running tasks depend on a
// definition that changed: Fields are the restart fields (see
// RestartFields) that differ from the baseline, sorted, InterceptorsKey
// last.
type TaskDrift struct {
	Server string
	Fields []string
}

// Message says what changed and what to do, naming the server and the
// fields only (never a value).
func (d TaskDrift) Message() string {
	return "MCP server '" + d.Server + "' has task toolsets and its " + strings.Join(d.Fields, ", ") +
		" changed after startup; restart mcpbus (at least the api service that owns the config file) to apply it, or revert the change"
}

// TaskDrifts compares cur with the deployment's startup baseline and lists
// every server that is enabled with task toolsets in both and whose restart
// fields changed, in cur's file order. A server added, disabled or removed
// since the baseline is no drift (it has no tasks that depend on the old
// definition in flight, or it no longer serves). Nil base means no
// baseline: nothing drifted.
func TaskDrifts(base, cur *Extensions) []TaskDrift {
	if base == nil || cur == nil {
		return nil
	}
	chainChanged := base.InterceptorsFingerprint() != cur.InterceptorsFingerprint()
	var out []TaskDrift
	for _, s := range cur.Enabled() {
		b := base.Server(s.Name)
		if !s.TaskEnabled() || b == nil || !b.Enabled || !b.TaskEnabled() {
			continue
		}
		fields := changedRestartFields(b, s)
		if chainChanged {
			fields = append(fields, InterceptorsKey)
		}
		if len(fields) > 0 {
			out = append(out, TaskDrift{Server: s.Name, Fields: fields})
		}
	}
	return out
}

// RestartFields are the fields of a task-enabled server its durable tasks
// depend on (the poller calls the endpoint a task was submitted to):
// connection, authentication, transport, timeouts, toolsets, cwd and any
// unknown key. Description, routing, tools and tool_name_prefix stay hot.
func RestartFields(s *Server) map[string]any {
	return map[string]any{
		"type": s.Type, "command": s.Command, "args": s.Args, "env": s.Env,
		"url": s.URL, "headers": s.Headers, "oauth": s.OAuth,
		"tool_call_timeout": s.ToolCallTimeout, "session_init_timeout": s.SessionInitTimeout,
		"task_toolsets": s.TaskToolsets, "cwd": s.Cwd,
		"headers_from_context": s.HeadersFromContext, "user_auth": s.UserAuth,
		"extra": s.Extra,
	}
}

// changedRestartFields lists the restart fields that differ, sorted; an
// unknown key that changed is named itself.
func changedRestartFields(a, b *Server) []string {
	fa, fb := RestartFields(a), RestartFields(b)
	var out []string
	for k, va := range fa {
		if k == "extra" {
			continue
		}
		if !SameJSON(va, fb[k]) {
			out = append(out, k)
		}
	}
	for k := range joinedKeys(a.Extra, b.Extra) {
		if !SameJSON(a.Extra[k], b.Extra[k]) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func joinedKeys(a, b map[string]json.RawMessage) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// SameJSON reports whether a and b encode to the same JSON value (key
// order, spacing and number spelling do not count).
func SameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
