// Package interceptors is the Go form of DeerFlow's mcpInterceptors: code
// that runs around every tool call of a server and may change its headers
// or arguments, answer it itself, or fail it.
//
// An mcpInterceptors entry is either the name of an interceptor compiled
// into mcpbus (a [Registry]; "name" or "name:argument") or "nats:<subject>",
// an external interceptor in another process (contract in
// pkg/bus/interceptors.go). [Registry.Build] resolves the entries once per
// enabled server; an entry that cannot be resolved is skipped with a
// warning and the others keep working.
//
// A [Chain] runs its interceptors in order around a terminal [Handler]: the
// first runs first, the last runs nearest the transport, so its header
// value wins.
package interceptors

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Request is one tool call as interceptors see it. Interceptors may change
// Headers and Arguments in place before calling next.
type Request struct {
	// Server is the MCP server's name and Transport its type.
	Server, Transport string
	// Tool is the server's raw tool name; VisibleName what the agent called.
	Tool, VisibleName string
	// Arguments is a JSON object or nil.
	Arguments json.RawMessage
	// Headers are the HTTP headers the call will carry (for stdio servers:
	// the headers sent as _meta.headers of tools/call). Use headers.Set.
	// An interceptor checks each name and value it sets (headers.ValidName,
	// headers.Check), once, as the built-in sources do: nothing after the
	// chain checks them again.
	Headers map[string]string
	// UserID and ThreadID are never empty (bus.DefaultScopeID, "default",
	// when absent: bus.Scope.User and Thread).
	UserID, ThreadID, RunID, ToolCallID string
	// Secrets are the request's context.secrets, in process only: never log,
	// store or send them anywhere but where the interceptor is meant to.
	Secrets map[string]string
}

// Result is a call's result.
type Result struct {
	Content           []json.RawMessage
	StructuredContent json.RawMessage
	IsError           bool
	// Meta is the result's _meta as the upstream sent it (nil when
	// absent); it reaches the caller unchanged.
	Meta json.RawMessage
}

// Handler performs (the rest of) a call.
type Handler func(ctx context.Context, req *Request) (*Result, error)

// Interceptor wraps a call: it may change req and call next, return a
// result without calling next, or return an error.
type Interceptor func(ctx context.Context, req *Request, next Handler) (*Result, error)

// Named is an interceptor and the entry it came from (for logs).
type Named struct {
	Name string
	Fn   Interceptor
}

// Chain returns a handler running ins in order around terminal.
func Chain(ins []Named, terminal Handler) Handler {
	h := terminal
	for i := len(ins) - 1; i >= 0; i-- {
		fn, next := ins[i].Fn, h
		h = func(ctx context.Context, req *Request) (*Result, error) { return fn(ctx, req, next) }
	}
	return h
}

// Env is what builders may use.
type Env struct {
	// Server is the single server this instance is built for.
	Server *config.Server
	Log    *slog.Logger
	NC     *nats.Conn
}

// Builder builds one interceptor instance for one server. arg is the text
// after "name:" in the entry ("" when absent). A nil Interceptor with a nil
// error means "skip silently".
type Builder func(arg string, env Env) (Interceptor, error)

// Registry maps names to builders. Safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Builder
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Builder{}} }

// Default returns a registry holding the built-in interceptors:
// "request_logger" and "set_header".
func Default() *Registry {
	r := NewRegistry()
	r.Register(NameRequestLogger, buildRequestLogger)
	r.Register(NameSetHeader, buildSetHeader)
	return r
}

// Register adds (or replaces) a builder.
func (r *Registry) Register(name string, b Builder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = b
}

// Names lists the registered names.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NATSPrefix starts an external interceptor entry.
const NATSPrefix = "nats:"

// Build resolves entries for env.Server in order. Entries that cannot be
// resolved (unknown name, bad argument, builder error, nats: without a
// connection) are skipped with a warning naming the entry.
func (r *Registry) Build(entries []string, env Env) []Named {
	if env.Log == nil {
		env.Log = observability.Discard()
	}
	var out []Named
	for _, entry := range entries {
		fn, err := r.build(entry, env)
		if err != nil {
			env.Log.Warn("MCP interceptor skipped", "interceptor", entry, observability.Server(serverName(env)), observability.Err(err))
			continue
		}
		if fn != nil {
			out = append(out, Named{Name: entry, Fn: fn})
		}
	}
	return out
}

func serverName(env Env) string {
	if env.Server == nil {
		return ""
	}
	return env.Server.Name
}

func (r *Registry) build(entry string, env Env) (Interceptor, error) {
	entry = strings.TrimSpace(entry)
	if subject, ok := strings.CutPrefix(entry, NATSPrefix); ok {
		subject = strings.TrimSpace(subject)
		if subject == "" {
			return nil, fmt.Errorf("%q names no subject", entry)
		}
		if env.NC == nil {
			return nil, fmt.Errorf("%q needs a NATS connection", entry)
		}
		return NATS(env.NC, subject, DefaultNATSTimeout), nil
	}
	name, arg, _ := strings.Cut(entry, ":")
	r.mu.RLock()
	b, ok := r.m[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("no interceptor named %q is compiled into mcpbus (known: %s; or use nats:<subject>)", name, strings.Join(r.Names(), ", "))
	}
	fn, err := b(arg, env)
	if err != nil {
		return nil, fmt.Errorf("building %q: %w", entry, err)
	}
	return fn, nil
}
