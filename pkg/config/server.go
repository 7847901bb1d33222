package config

import (
	"encoding/json"
	"fmt"
	"github.com/mcpbus/mcpbus/pkg/pinning"
	"os"
	"time"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportSSE   = "sse"
	TransportHTTP  = "http"
)

// DefaultSessionInitTimeout bounds spawn + initialize + tools/list.
const DefaultSessionInitTimeout = 60 * time.Second

// Values of the enumerated server fields.
const (
	RoutingOff    = "off"
	RoutingPrefer = "prefer"

	OnMissingDeny        = "deny"
	OnMissingPassthrough = "passthrough"

	GrantClientCredentials = "client_credentials"
	GrantRefreshToken      = "refresh_token"
	// GrantAuthorizationCode: people connect their account (MCP
	// authorization: discovery from the server's 401, PKCE, resource).
	GrantAuthorizationCode = "authorization_code"

	// ConnectPerUser (the default) and ConnectShared are oauth.connect:
	// each user connects their own account, or an admin connects one
	// account for everyone.
	ConnectPerUser = "per_user"
	ConnectShared  = "shared"

	// DefaultUserAuthHeader is user_auth.header when unset.
	DefaultUserAuthHeader = "Authorization"

	// MaxTaskServerNameChars bounds the name of a task-enabled server.
	MaxTaskServerNameChars = 128
	// MaxTaskToolsetNameChars bounds a task toolset name.
	MaxTaskToolsetNameChars = 255
)

// Server is one mcpServers entry after $VAR expansion and defaults.
type Server struct {
	Name    string
	Enabled bool              // default true
	Type    string            // stdio (default), sse, http; "transport" is an alias
	Command string            // stdio
	Args    []string          // stdio
	Env     map[string]string // stdio
	URL     string            // sse, http
	Headers map[string]string // sse, http
	// FollowRedirects lets the upstream redirect (sse, http; default
	// false: a redirect fails the request). Every hop is checked by the
	// egress policy, and no configured or per-call header crosses origins.
	FollowRedirects    bool
	OAuth              *OAuth
	Description        string
	Routing            Routing
	Tools              map[string]ToolOverride // keyed by the server's raw tool name
	ToolNamePrefix     bool                    // default true
	ToolCallTimeout    time.Duration           // 0 = no limit
	SessionInitTimeout time.Duration           // default 60s; 0 = disabled (null)
	TaskToolsets       []TaskToolset
	Cwd                string // "" = inherit (discovery) / thread workspace (calls)
	// MaxResponseBytes caps one upstream response (an HTTP body, an SSE
	// event, a stdio line); 0 = limits.max_upstream_response_bytes. A
	// personal connection cannot raise it above that default.
	MaxResponseBytes   int64
	HeadersFromContext *HeadersFromContext
	UserAuth           *UserAuth
	// Pinning is the server's tool pinning policy ("" = not set: the
	// settings' pinning.default; see PinningSettings.Policy).
	Pinning pinning.Policy
	// Quotas limit the server's calls over every caller, across the
	// replicas (calls per window, calls in flight); Tools is unused here.
	Quotas []Quota
	// Extra holds unknown keys, kept verbatim.
	Extra map[string]json.RawMessage
	// Raw is the entry as written in the file, unexpanded.
	Raw json.RawMessage
	// Fingerprint is a SHA-256 (hex) of the canonical expanded entry: equal
	// fingerprints mean an unchanged server.
	Fingerprint string
}

// Routing is routing metadata ("off" or "prefer", priority 0..100).
type Routing struct {
	Mode     string   `json:"mode"`
	Priority int      `json:"priority"`
	Keywords []string `json:"keywords"`
}

// ToolOverride overrides routing fields for one raw tool name; nil fields inherit.
type ToolOverride struct {
	Routing *RoutingOverride `json:"routing,omitempty"`
}

// RoutingOverride sets only the fields present.
type RoutingOverride struct {
	Mode     *string   `json:"mode,omitempty"`
	Priority *int      `json:"priority,omitempty"`
	Keywords *[]string `json:"keywords,omitempty"`
}

// OAuth is a server's oauth block.
type OAuth struct {
	Enabled   bool   `json:"enabled"`
	TokenURL  string `json:"token_url"`
	GrantType string `json:"grant_type"` // client_credentials (default), refresh_token or authorization_code
	// Connect is per_user (default) or shared (authorization_code only;
	// a personal connection is always per user).
	Connect string `json:"connect,omitempty"`
	// TokenEndpointAuthMethod is how the pre-registered client_id
	// authenticates (authorization_code): client_secret_basic,
	// client_secret_post or none; empty: chosen from the server's metadata.
	TokenEndpointAuthMethod string            `json:"token_endpoint_auth_method,omitempty"`
	ClientID                string            `json:"client_id"`
	ClientSecret            string            `json:"client_secret"`
	RefreshToken            string            `json:"refresh_token"`
	Scope                   string            `json:"scope"`
	Audience                string            `json:"audience"`
	TokenField              string            `json:"token_field"`          // default access_token
	TokenTypeField          string            `json:"token_type_field"`     // default token_type
	ExpiresInField          string            `json:"expires_in_field"`     // default expires_in
	DefaultTokenType        string            `json:"default_token_type"`   // default Bearer
	RefreshSkewSeconds      int               `json:"refresh_skew_seconds"` // default 60; negative counts as 0
	ExtraTokenParams        map[string]string `json:"extra_token_params"`
}

// TaskToolset binds the three raw tool names of a durable task protocol.
type TaskToolset struct {
	Name       string `json:"name"`
	SubmitTool string `json:"submit_tool"`
	StatusTool string `json:"status_tool"`
	CancelTool string `json:"cancel_tool"`
}

// HeadersFromContext maps HTTP header names to keys of context.secrets.
type HeadersFromContext struct {
	Enabled   bool              `json:"enabled"`
	Headers   map[string]string `json:"headers"`
	OnMissing string            `json:"on_missing"` // deny (default) or passthrough
}

// UserAuth maps mcpbus user ids to a credential sent in Header.
type UserAuth struct {
	Enabled   bool              `json:"enabled"`
	Header    string            `json:"header"` // default Authorization
	Users     map[string]string `json:"users"`
	OnMissing string            `json:"on_missing"` // deny (default) or passthrough
}

// ValidateCwd checks that a configured working directory exists and is a
// directory. An empty Cwd (inherit) is always valid.
func (s *Server) ValidateCwd() error {
	if s.Cwd == "" {
		return nil
	}
	info, err := os.Stat(s.Cwd)
	if err != nil {
		return &CwdError{Server: s.Name, Cwd: s.Cwd, Err: err}
	}
	if !info.IsDir() {
		return &CwdError{Server: s.Name, Cwd: s.Cwd}
	}
	return nil
}

// CwdError is a configured working directory that cannot be used: Err is
// why it cannot be read, nil when it is not a directory.
type CwdError struct {
	Server string
	Cwd    string
	Err    error
}

func (e *CwdError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("MCP server '%s': cwd %s: %v", e.Server, e.Cwd, e.Err)
	}
	return fmt.Sprintf("MCP server '%s': cwd %s is not a directory", e.Server, e.Cwd)
}

func (e *CwdError) Unwrap() error { return e.Err }

// UserMessage names the server and the field, not the host's path
// (bus.UserMessager): the path is for the operator's logs.
func (e *CwdError) UserMessage() string {
	return fmt.Sprintf("MCP server '%s': its configured cwd is not a directory this host can use", e.Server)
}

// TaskEnabled reports whether the server declares task_toolsets.
func (s *Server) TaskEnabled() bool { return len(s.TaskToolsets) > 0 }

// OAuthEnabled reports whether the server has an oauth block with enabled true.
func (s *Server) OAuthEnabled() bool { return s.OAuth != nil && s.OAuth.Enabled }

// ConnectsAccounts reports whether people connect their accounts on this
// server (an enabled oauth block with grant_type authorization_code).
func (s *Server) ConnectsAccounts() bool {
	return s.OAuthEnabled() && s.OAuth.GrantType == GrantAuthorizationCode
}
