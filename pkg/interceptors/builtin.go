package interceptors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Names of the built-in interceptors.
const (
	// NameRequestLogger logs every call at info: server, tool, user,
	// thread, header names (never values), duration, outcome.
	NameRequestLogger = "request_logger"
	// NameSetHeader sets one header on every call: "set_header:Name=value"
	// (the value may be a whole-string $VAR, expanded when the config is
	// loaded like every other value).
	NameSetHeader = "set_header"
)

func buildRequestLogger(_ string, env Env) (Interceptor, error) {
	log := env.Log.With(observability.Server(serverName(env)))
	return func(ctx context.Context, req *Request, next Handler) (*Result, error) {
		start := time.Now()
		res, err := next(ctx, req)
		attrs := []any{observability.Tool(req.VisibleName), "raw_tool", req.Tool, "user_id", req.UserID, "thread_id", req.ThreadID,
			"header_names", strings.Join(headers.Names(req.Headers), ","), "duration_ms", time.Since(start).Milliseconds()}
		switch {
		case err != nil:
			log.Info("mcp tool call failed", append(attrs, observability.Err(err))...)
		default:
			log.Info("mcp tool call", append(attrs, "is_error", res != nil && res.IsError)...)
		}
		return res, err
	}, nil
}

func buildSetHeader(arg string, _ Env) (Interceptor, error) {
	name, value, ok := strings.Cut(arg, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return nil, errors.New(`set_header needs "set_header:Name=value"`)
	}
	if !headers.ValidName(name) {
		return nil, fmt.Errorf("set_header: %q is not a valid header name", name)
	}
	if reason := headers.Check(value); reason != "" {
		return nil, fmt.Errorf("set_header: the value for header '%s' %s", name, reason)
	}
	return func(ctx context.Context, req *Request, next Handler) (*Result, error) {
		if req.Headers == nil {
			req.Headers = map[string]string{}
		}
		headers.Set(req.Headers, name, value)
		return next(ctx, req)
	}, nil
}
