package tokens

import (
	"errors"

	"golang.org/x/oauth2"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// grantSpanName names the span of one token request: a refresh of the
// rotating chain, or a fetch (client_credentials).
func grantSpanName(grant string) string {
	if grant == config.GrantRefreshToken {
		return "oauth token refresh"
	}
	return "oauth token fetch"
}

// oauthOutcome is a failed token request's outcome: the endpoint's OAuth
// error code when it is one RFC 6749 defines (invalid_grant, …), else
// oauth_failed. The endpoint's own text never reaches a span.
func oauthOutcome(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		switch re.ErrorCode {
		case "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope":
			return re.ErrorCode
		}
	}
	return "oauth_failed"
}
