package toolcall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpauth"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// The header sources, in precedence order: static headers (the request's
// starting headers) < OAuth < user_auth < headers_from_context. Each source
// sets its fields with headers.Set, so a name is sent once whatever its
// spelling, and checks every name and value it sets, once: nothing after
// the chain checks them again (pipeline.go). An error names the source,
// the header or key and the reason, never the value.

// errBadHeaderName is the error for a configured header name that is not
// an HTTP token.
func errBadHeaderName(srv *config.Server, source, name string) error {
	return bus.Errorf(bus.CodeCredentialsInvalid, "MCP server '%s': %s header '%s' is not a valid HTTP header name", srv.Name, source, name)
}

// checkStatic refuses static headers that cannot be sent.
func checkStatic(srv *config.Server) error {
	var bad []string
	for _, name := range headers.Names(srv.Headers) {
		if !headers.ValidName(name) {
			bad = append(bad, fmt.Sprintf("'%s' is not a valid header name", name))
			continue
		}
		if reason := headers.Check(srv.Headers[name]); reason != "" {
			bad = append(bad, fmt.Sprintf("'%s' %s", name, reason))
		}
	}
	if len(bad) > 0 {
		return bus.Errorf(bus.CodeConfigError, "MCP server '%s' cannot send its static header(s): %s. Fix the value in extensions_config.json (or the environment variable it names).", srv.Name, strings.Join(bad, "; "))
	}
	return nil
}

// oauthInterceptor sets the server's OAuth header from the tokens service.
// owner is "" for a deployment server and the user for a personal
// connection (the tokens service keys its chain by runtime name and owner).
// For a server whose accounts people connect (oauth.grant_type
// authorization_code) the token is the caller's (per user) or the shared
// one, and an upstream 401 gets one forced refresh (naming the refused
// value's hash, so concurrent refusals cause one refresh) and one retry;
// a second 401 is auth_required with a link to connect again.
func (s *Service) oauthInterceptor(srv *config.Server, owner string) interceptors.Interceptor {
	connects := srv.ConnectsAccounts()
	return func(ctx context.Context, req *interceptors.Request, next interceptors.Handler) (*interceptors.Result, error) {
		treq := bus.TokenRequest{Server: srv.Name, Owner: owner, ConfigFingerprint: srv.Fingerprint}
		if connects {
			treq.UserID = req.UserID
		}
		for attempt := 0; ; attempt++ {
			name, value, _, err := s.deps.Tokens.Header(ctx, treq)
			if err != nil {
				return nil, err
			}
			if name == "" {
				name = "Authorization"
			}
			if !headers.ValidName(name) {
				return nil, errBadHeaderName(srv, "the OAuth", name)
			}
			if reason := headers.Check(value); reason != "" {
				return nil, bus.Errorf(bus.CodeOAuthFailed, "MCP server '%s' cannot send the OAuth access token from its token endpoint as HTTP header '%s': it %s.", srv.Name, name, reason)
			}
			headers.Set(req.Headers, name, value)
			res, err := next(ctx, req)
			if err != nil && connects && errors.Is(err, mcpclient.ErrForbidden) {
				if scope, ok := insufficientScope(err); ok {
					// The connection may have been widened since this
					// token was cached: try its current token once.
					s.deps.Tokens.Forget(srv.Name, owner)
					if _, fresh, _, ferr := s.deps.Tokens.Header(ctx, treq); attempt == 0 && ferr == nil && fresh != value {
						attempt++
						continue
					}
					return nil, s.stepUp(ctx, srv, owner, req.UserID, scope)
				}
			}
			if err == nil || !connects || !errors.Is(err, mcpclient.ErrAuthorizationRequired) {
				return res, err
			}
			if attempt > 0 {
				return nil, s.reauthorize(ctx, srv, owner, req.UserID)
			}
			sum := sha256.Sum256([]byte(value))
			treq.ForceRefresh, treq.RejectedValueSHA256 = true, hex.EncodeToString(sum[:])
		}
	}
}

// reauthorize is the auth_required error for a connection whose fresh
// token the server still refuses: a new flow's link.
func (s *Service) reauthorize(ctx context.Context, srv *config.Server, owner, user string) error {
	reply, err := bus.Request[bus.OAuthAuthorizeReply](ctx, s.deps.NC, s.deps.Names.InternalOAuthAuthorize(),
		bus.OAuthAuthorizeRequest{Server: srv.Name, Owner: owner, UserID: user})
	if err != nil {
		return err
	}
	return bus.AuthRequired(srv.Name, reply.AuthorizeURL, "MCP server '"+srv.Name+"' refused the access token of your connection.")
}

// insufficientScope is the scope a 403's Bearer challenge with error
// insufficient_scope asks for.
func insufficientScope(err error) (string, bool) {
	var fe *mcpclient.ForbiddenError
	if !errors.As(err, &fe) {
		return "", false
	}
	ch, ok := mcpauth.ParseChallenge(fe.Challenges)
	if !ok || ch.Error != "insufficient_scope" {
		return "", false
	}
	return ch.Scope, true
}

// stepUp is the answer to a 403 insufficient_scope on a connected
// account: the tokens service's step-up (auth_required with a link asking
// for the wider scope, or its refusal once the connection had its share
// of step-ups).
func (s *Service) stepUp(ctx context.Context, srv *config.Server, owner, user, scope string) error {
	reply, err := bus.Request[bus.OAuthAuthorizeReply](ctx, s.deps.NC, s.deps.Names.InternalOAuthAuthorize(),
		bus.OAuthAuthorizeRequest{Server: srv.Name, Owner: owner, UserID: user, StepUp: true, StepUpScope: scope})
	if err != nil {
		return err
	}
	return bus.AuthRequired(srv.Name, reply.AuthorizeURL, "MCP server '"+srv.Name+"' needs more access than your connection grants.")
}

// userAuthInterceptor sets user_auth.header to the caller's entry in
// user_auth.users. The user "default" counts as unmapped.
func userAuthInterceptor(srv *config.Server) interceptors.Interceptor {
	ua := srv.UserAuth
	header := ua.Header
	if strings.TrimSpace(header) == "" {
		header = config.DefaultUserAuthHeader
	}
	return func(ctx context.Context, req *interceptors.Request, next interceptors.Handler) (*interceptors.Result, error) {
		if !headers.ValidName(header) {
			return nil, errBadHeaderName(srv, "the user_auth", header)
		}
		value := ""
		if req.UserID != bus.DefaultScopeID {
			value = ua.Users[req.UserID]
		}
		if value == "" {
			if ua.OnMissing == config.OnMissingPassthrough {
				return next(ctx, req)
			}
			return nil, bus.Errorf(bus.CodeCredentialsMissing, "No credential is configured for your account on MCP server '%s'. Ask the operator to add your user id to that server's user_auth.users map (or set its environment variable).", srv.Name)
		}
		if reason := headers.Check(value); reason != "" {
			return nil, bus.Errorf(bus.CodeCredentialsInvalid, "MCP server '%s' cannot send the user_auth credential configured for your account as HTTP header '%s': it %s. Ask the operator to fix your entry in user_auth.users.", srv.Name, header, reason)
		}
		headers.Set(req.Headers, header, value)
		return next(ctx, req)
	}
}

// headersFromContextInterceptor maps context.secrets keys to headers. A
// value that cannot be sent is always refused; a missing (or empty) one is
// refused with on_missing "deny" and left to the lower sources with
// "passthrough".
func headersFromContextInterceptor(srv *config.Server) interceptors.Interceptor {
	hfc := srv.HeadersFromContext
	names := headers.Names(hfc.Headers)
	return func(ctx context.Context, req *interceptors.Request, next interceptors.Handler) (*interceptors.Result, error) {
		var missing, bad []string
		set := map[string]string{}
		for _, h := range names {
			if !headers.ValidName(h) {
				return nil, errBadHeaderName(srv, "the headers_from_context", h)
			}
			key := hfc.Headers[h]
			v := req.Secrets[key]
			if v == "" {
				missing = append(missing, key)
				continue
			}
			if reason := headers.Check(v); reason != "" {
				bad = append(bad, fmt.Sprintf("'%s' %s", key, reason))
				continue
			}
			set[h] = v
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return nil, bus.Errorf(bus.CodeCredentialsInvalid, "MCP server '%s' cannot send request-scoped credential(s) as HTTP header values: %s. Fix the value passed in context.secrets; a stray newline picked up when reading a token from a file is the usual cause.", srv.Name, strings.Join(bad, "; "))
		}
		if len(missing) > 0 && hfc.OnMissing != config.OnMissingPassthrough {
			sort.Strings(missing)
			missing = compactStrings(missing)
			return nil, bus.Errorf(bus.CodeCredentialsMissing, "MCP server '%s' needs request-scoped credential(s) %s. Send them in context.secrets, or set this server's headers_from_context.on_missing to 'passthrough'.", srv.Name, strings.Join(missing, ", "))
		}
		for _, h := range names {
			if v, ok := set[h]; ok {
				headers.Set(req.Headers, h, v)
			}
		}
		return next(ctx, req)
	}
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
