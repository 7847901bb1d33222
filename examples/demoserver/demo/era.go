package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Protocol eras the demo server can be limited to (demoserver -era).
const (
	// EraBoth is mcp-go's default: initialize for 2025-11-25 and older,
	// server/discover listing every version, 2026-07-28 included.
	EraBoth = "both"
	// EraLegacy is a server from before 2026-07-28: server/discover is
	// refused (an invalid-request error), only initialize works.
	EraLegacy = "legacy"
	// EraShim answers server/discover but lists only the legacy versions,
	// as an SDK shim that negotiates down does.
	EraShim = "shim"
	// EraModern speaks 2026-07-28 only: server/discover lists it alone and
	// initialize is refused.
	EraModern = "modern"
)

// legacyVersions are the revisions with the initialize handshake.
var legacyVersions = []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326, mcp.ProtocolVersion20241105}

// EraOptions returns the server options (hooks refusing initialize or
// server/discover) that limit a server to era, and the versions
// server/discover advertises (nil: mcp-go's default); the transport must
// advertise them: [EraStdioContext] for stdio,
// server.WithStreamableHTTPProtocolVersions for HTTP.
func EraOptions(era string) ([]server.ServerOption, []string, error) {
	var refused mcp.MCPMethod
	var versions []string
	switch era {
	case "", EraBoth:
		return nil, nil, nil
	case EraLegacy:
		refused = mcp.MethodServerDiscover
	case EraShim:
		versions = legacyVersions
	case EraModern:
		refused, versions = mcp.MethodInitialize, []string{mcp.ProtocolVersion20260728}
	default:
		return nil, nil, fmt.Errorf("unknown era %q (want both, legacy, shim or modern)", era)
	}
	if refused == "" {
		return nil, versions, nil
	}
	hooks := &server.Hooks{}
	hooks.AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
		raw, _ := message.(json.RawMessage)
		var m struct {
			Method mcp.MCPMethod `json:"method"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Method == refused {
			return errors.New("this demo server runs with -era " + era + " and does not answer " + string(refused))
		}
		return nil
	})
	return []server.ServerOption{server.WithHooks(hooks)}, versions, nil
}

// EraStdioContext returns a stdio context func making server/discover
// advertise versions (nil leaves mcp-go's default).
func EraStdioContext(versions []string) server.StdioContextFunc {
	return func(ctx context.Context) context.Context {
		if versions == nil {
			return ctx
		}
		return server.WithSupportedProtocolVersions(ctx, versions)
	}
}

// NewHTTP is the demo server of cfg limited to era over streamable HTTP
// (opts added), advertising that era's versions: what a test puts behind
// an httptest server.
func NewHTTP(era string, cfg Config, opts ...server.StreamableHTTPOption) (*server.StreamableHTTPServer, error) {
	eraOpts, versions, err := EraOptions(era)
	if err != nil {
		return nil, err
	}
	cfg.ServerOptions = append(cfg.ServerOptions, eraOpts...)
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return server.NewStreamableHTTPServer(s, append(opts, server.WithStreamableHTTPProtocolVersions(versions...))...), nil
}
