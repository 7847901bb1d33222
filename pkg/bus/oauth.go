package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CodeAuthRequired: the caller has to connect (or reconnect) their account
// on the server before it can be used. Details: "server", "authorize_url"
// (open it in a browser), "state" (needs_auth). REST: 401.
const CodeAuthRequired Code = "auth_required"

// AuthRequired is the CodeAuthRequired error for server with the link.
func AuthRequired(server, authorizeURL, why string) *Error {
	msg := "Connect your account on MCP server '" + server + "' to use it: open " + authorizeURL + " in a browser, sign in, then retry."
	if why != "" {
		msg = why + " " + msg
	}
	return &Error{Code: CodeAuthRequired, Message: msg,
		Details: map[string]any{"server": server, "authorize_url": authorizeURL, "state": ConnectionNeedsAuth}}
}

// Connection states (OAuthConnection.State).
const (
	ConnectionConnected = "connected"
	ConnectionNeedsAuth = "needs_auth"
	ConnectionError     = "error"
)

// The tokens service's connect-your-account subjects (request/reply,
// internal: the api calls them for an authenticated caller).

// InternalOAuthAuthorize starts a flow: OAuthAuthorizeRequest →
// OAuthAuthorizeReply.
func (n Names) InternalOAuthAuthorize() string { return n.Internal("oauth.authorize") }

// InternalOAuthCallback finishes a flow: OAuthCallbackRequest →
// OAuthCallbackReply.
func (n Names) InternalOAuthCallback() string { return n.Internal("oauth.callback") }

// InternalOAuthConnections lists a user's connections:
// OAuthConnectionsRequest → OAuthConnectionsReply.
func (n Names) InternalOAuthConnections() string { return n.Internal("oauth.connections") }

// InternalOAuthAccountStates tells discovery which of a user's accounts
// on per-user deployment servers are not connected:
// OAuthAccountStatesRequest → OAuthAccountStatesReply. It starts no flow.
func (n Names) InternalOAuthAccountStates() string { return n.Internal("oauth.account_states") }

// OAuthAccountStatesRequest asks for UserID's account states.
type OAuthAccountStatesRequest struct {
	UserID string `json:"user_id"`
}

// OAuthAccountStatesReply maps each per-user deployment server on which
// the user's account is not connected to its state (needs_auth or
// error); a server absent is connected (or connects no accounts).
type OAuthAccountStatesReply struct {
	UserID string            `json:"user_id"`
	States map[string]string `json:"states"`
}

// InternalOAuthDisconnect revokes and deletes a connection:
// OAuthConnectionRequest → OAuthConnection (state needs_auth).
func (n Names) InternalOAuthDisconnect() string { return n.Internal("oauth.disconnect") }

// OAuthStatesBucket holds the flows in progress (sealed, single-use,
// dropped after their lifetime).
func (n Names) OAuthStatesBucket() string { return n.js + "MCPBUS_OAUTH_STATES" }

// OAuthBucket holds the connections (sealed records: issuer, endpoints,
// client, scopes, state) and the dynamic client registrations per issuer.
func (n Names) OAuthBucket() string { return n.js + "MCPBUS_OAUTH" }

// OAuthStatesKV returns the flow-state bucket, creating it: an entry is
// dropped ttl after it was written.
func OAuthStatesKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.OAuthStatesBucket(), History: 1, Storage: jetstream.FileStorage, TTL: ttl, Replicas: StreamReplicas(js, replicas),
		Description: "mcpbus connect-your-account flows in progress",
	})
}

// OAuthKV returns the connection bucket, creating it (no TTL).
func OAuthKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.OAuthBucket(), History: 1, Storage: jetstream.FileStorage, Replicas: StreamReplicas(js, replicas),
		Description: "mcpbus connected accounts and client registrations",
	})
}

// OAuthConnectionRequest names one connection: Server is a deployment
// server, or with Owner set the runtime name of Owner's personal
// connection; UserID is the caller (per-user connections are theirs).
// Admin says the caller may connect a shared server.
type OAuthConnectionRequest struct {
	Server string `json:"server"`
	Owner  string `json:"owner,omitempty"`
	UserID string `json:"user_id"`
	Admin  bool   `json:"admin,omitempty"`
	// StepUp, on an authorize request, answers an upstream's 403
	// insufficient_scope (toolcall sets it): the flow asks for
	// StepUpScope, the challenge's scope, united with the connection's,
	// within a limit of step-ups per connection.
	StepUp      bool   `json:"step_up,omitempty"`
	StepUpScope string `json:"step_up_scope,omitempty"`
}

// OAuthAuthorizeRequest starts a flow for the connection.
type OAuthAuthorizeRequest = OAuthConnectionRequest

// OAuthAuthorizeReply is the link to open in a browser.
type OAuthAuthorizeReply struct {
	Server       string    `json:"server"`
	AuthorizeURL string    `json:"authorize_url"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// OAuthCallbackRequest is what the authorization server sent to the
// callback (query parameters).
type OAuthCallbackRequest struct {
	State            string `json:"state"`
	Code             string `json:"code,omitempty"`
	Iss              string `json:"iss,omitempty"`
	Error            string `json:"error,omitempty"`
	ErrorDescription string `json:"error_description,omitempty"`
}

// OAuthCallbackReply names the connection that is now connected.
type OAuthCallbackReply struct {
	Server string `json:"server"`
	UserID string `json:"user_id"`
}

// OAuthConnectionsRequest asks for UserID's connections.
type OAuthConnectionsRequest struct {
	UserID string `json:"user_id"`
	Admin  bool   `json:"admin,omitempty"`
}

// OAuthConnection is one server whose accounts people connect.
type OAuthConnection struct {
	Server       string     `json:"server"`
	Mode         string     `json:"mode"` // per_user, shared or personal
	State        string     `json:"state"`
	Issuer       string     `json:"issuer,omitempty"`
	Scopes       string     `json:"scopes,omitempty"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	ConnectedAt  *time.Time `json:"connected_at,omitempty"`
	AuthorizeURL string     `json:"authorize_url,omitempty"`
	Error        string     `json:"error,omitempty"`
}

// OAuthConnectionsReply lists them, sorted by server.
type OAuthConnectionsReply struct {
	Connections []OAuthConnection `json:"connections"`
}
