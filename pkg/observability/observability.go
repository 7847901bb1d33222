// Package observability builds the structured loggers of mcpbus and holds the
// attribute helpers, so every service logs static messages with the same
// snake_case keys (service, server, tool, error, …).
package observability

import (
	"io"
	"log/slog"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/redact"
)

// NewLogger returns a slog logger writing text or JSON at the given level
// ("debug", "info", "warn", "error"; default info). Every URL in a message
// or an attribute loses its userinfo and query string (package redact), so
// no log line of a service shows a credential carried in a URL.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if strings.EqualFold(format, "json") {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(TraceHandler(redact.Handler(h, nil)))
}

// Discard is a logger that drops everything.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ForService returns the logger every part of one service uses.
func ForService(l *slog.Logger, service string) *slog.Logger { return l.With(KeyService, service) }

// Attribute keys used across services.
const (
	KeyService = "service"
	KeyServer  = "server"
	KeyTool    = "tool"
	KeyError   = "error"
	KeyGen     = "generation"
	KeyURL     = "url"
)

// Err is the one attribute for an error.
func Err(err error) slog.Attr { return slog.Any(KeyError, err) }

// Server names an upstream MCP server.
func Server(name string) slog.Attr { return slog.String(KeyServer, name) }

// Tool names a tool.
func Tool(name string) slog.Attr { return slog.String(KeyTool, name) }
