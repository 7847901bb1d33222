package tokens

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// invalidGrantMessage is the oauth_failed message when the provider rejects
// the refresh token.
func invalidGrantMessage(server string, fellBack bool) string {
	msg := fmt.Sprintf("MCP server '%s': the OAuth provider rejected the refresh token (invalid_grant). Configure a new refresh_token for this server.", server)
	if fellBack {
		msg += fmt.Sprintf(" This instance could not decrypt the refresh-token chain another instance stored and fell back to the configured refresh_token: every instance needs the same %s (or %s).",
			config.EnvCredentialsKey, config.EnvDeerFlowCredentialsKey)
	}
	return msg
}

// grantError turns a token request failure into an oauth_failed (or
// config_error) bus error whose message and cause contain no secret: the
// response body is never used, and the secrets of the request are masked
// in whatever text is kept.
func (s *Service) grantError(srv *config.Server, err error, refreshToken string, fellBack bool) error {
	o := srv.OAuth
	// The server's secrets, the refresh token in use, and the token URL's
	// userinfo and query (a transport error quotes the URL).
	mask := srv.Redactor().With(refreshToken).String
	var (
		msg  string
		code = bus.CodeOAuthFailed
		re   *oauth2.RetrieveError
		ce   configError
		te   *transportError
	)
	switch {
	case errors.As(err, &ce):
		code, msg = bus.CodeConfigError, fmt.Sprintf("MCP server '%s': %s", srv.Name, ce)
	case errors.As(err, &re) && re.ErrorCode == "invalid_grant" && o.GrantType == config.GrantRefreshToken:
		msg = invalidGrantMessage(srv.Name, fellBack)
	case errors.As(err, &re):
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		msg = fmt.Sprintf("MCP server '%s': the OAuth token endpoint refused the token request (HTTP %d %s", srv.Name, status, http.StatusText(status))
		if re.ErrorCode != "" {
			msg += ", error " + re.ErrorCode
			if re.ErrorDescription != "" {
				msg += ": " + re.ErrorDescription
			}
		}
		msg = mask(msg) + ")"
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("MCP server '%s': the OAuth token endpoint did not answer in time", srv.Name)
	case errors.As(err, &te):
		msg = mask(fmt.Sprintf("MCP server '%s': %s", srv.Name, te))
	default:
		msg = mask(fmt.Sprintf("MCP server '%s': %v", srv.Name, err))
	}
	s.log.Warn("OAuth token request failed", observability.Server(srv.Name), "code", string(code), "reason", msg)
	cause := &grantFailure{msg: msg}
	switch {
	case errors.As(err, &re):
		cause.oauthCode = re.ErrorCode
	case errors.Is(err, errNoRefreshToken):
		cause.oauthCode = "no_refresh_token"
	}
	return &bus.Error{Code: code, Message: msg, Cause: cause}
}

// grantFailure is the cause of a grantError: its masked message and the
// OAuth error code the endpoint answered (no_refresh_token when there was
// no refresh token to spend).
type grantFailure struct{ msg, oauthCode string }

func (e *grantFailure) Error() string { return e.msg }

// needsReauthorization reports whether err means that only the person
// can fix it by authorizing again: the refresh token was refused
// (invalid_grant) or there is none.
func needsReauthorization(err error) bool {
	var gf *grantFailure
	return errors.As(err, &gf) && (gf.oauthCode == "invalid_grant" || gf.oauthCode == "no_refresh_token")
}

// storeError refuses a refresh because the database cannot be used.
func (s *Service) storeError(srv *config.Server, what string, err error) error {
	s.log.Warn("refusing to refresh an OAuth token: the token store is unavailable", observability.Server(srv.Name), "step", what, observability.Err(err))
	return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': %s, so the refresh token is not used (a refresh nothing records would break the chain); retry when the database is back", srv.Name, what))
}
