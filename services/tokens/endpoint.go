package tokens

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/egress"
	"github.com/mcpbus/mcpbus/pkg/mcpauth"
)

// The token request follows the original (reference §5) rather than
// x/oauth2's token sources: x/oauth2 cannot read custom response fields
// (token_field, token_type_field, expires_in_field) and its refresh cannot
// carry scope, audience or extra_token_params. We keep x/oauth2's client
// authentication choice made explicit (oauth2.AuthStyleInParams: client_id
// and client_secret in the form body, never Basic, never auto-detected, so a
// failing request is never sent twice) and its error type, *oauth2.RetrieveError.

// authStyle is how client credentials are sent by default: in the form
// body, as the original sends them (tokenForm puts them there). An oauth
// block whose token_endpoint_auth_method is client_secret_basic (a
// connected account whose authorization server asked for it) sends them
// as a Basic header instead (requestToken). Nothing retries with another
// style.
const authStyle = oauth2.AuthStyleInParams

// maxTokenResponse bounds the token endpoint's response body.
const maxTokenResponse = 1 << 20

// grantResult is what a token endpoint returned.
type grantResult struct {
	AccessToken  string
	TokenType    string
	RefreshToken string // "" when the endpoint did not rotate it
	ExpiresIn    int    // seconds, at least 1
}

// newTokenHTTPClient returns the client for token endpoints: a 15 s bound on
// connecting, the TLS handshake and the response headers (the original's
// 15 s timeout); the whole exchange is bounded by the caller's context (the
// refresh abandons after Config.AbandonAfter).
func newTokenHTTPClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // never replay a refresh token to another URL
	}}
}

// newPersonalTokenHTTPClient is newTokenHTTPClient for personal
// connections' token_url: it connects through the egress policy (no proxy,
// internal addresses refused at connect time).
func newPersonalTokenHTTPClient(timeout time.Duration, policy *egress.Policy) *http.Client {
	hc := newTokenHTTPClient(timeout)
	hc.Transport = policy.WrapTransport(hc.Transport.(*http.Transport))
	return hc
}

// tokenForm builds the form body in the original's order: the extras, then
// the authoritative grant_type, scope and audience when set, then the
// grant's credentials. refreshToken is the chain's current token (used for
// the refresh_token grant only).
func tokenForm(o *config.OAuth, refreshToken string) (url.Values, error) {
	form := url.Values{}
	for k, v := range o.ExtraTokenParams {
		form.Set(k, v)
	}
	form.Set("grant_type", o.GrantType)
	if o.Scope != "" {
		form.Set("scope", o.Scope)
	}
	if o.Audience != "" {
		form.Set("audience", o.Audience)
	}
	switch o.GrantType {
	case config.GrantRefreshToken:
		if refreshToken == "" {
			return nil, errNoRefreshToken
		}
		form.Set("refresh_token", refreshToken)
		if basicAuth(o) {
			break
		}
		if o.ClientID != "" {
			form.Set("client_id", o.ClientID)
		}
		if o.ClientSecret != "" {
			form.Set("client_secret", o.ClientSecret)
		}
	default:
		if o.ClientID == "" || o.ClientSecret == "" {
			return nil, errNoClientCredentials
		}
		if !basicAuth(o) {
			form.Set("client_id", o.ClientID)
			form.Set("client_secret", o.ClientSecret)
		}
	}
	return form, nil
}

// basicAuth reports whether o's client authenticates with
// client_secret_basic (RFC 6749 §2.3.1: id and secret form-encoded, then
// as a Basic header).
func basicAuth(o *config.OAuth) bool {
	return o.TokenEndpointAuthMethod == mcpauth.AuthBasic && o.ClientID != "" && o.ClientSecret != ""
}

// configError is a problem of the oauth block itself.
type configError string

func (e configError) Error() string { return string(e) }

const (
	errNoRefreshToken      configError = "OAuth refresh_token grant requires refresh_token"
	errNoClientCredentials configError = "OAuth client_credentials requires client_id and client_secret"
)

// requestToken posts form to the token endpoint and parses the reply with
// the oauth block's field settings. A non-2xx reply, or a 2xx reply with an
// "error" field, is an *oauth2.RetrieveError; its Body is kept for
// errors.As callers but never logged or shown (it may echo a secret).
func requestToken(ctx context.Context, hc *http.Client, o *config.OAuth, form url.Values) (*grantResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("token_url is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basicAuth(o) {
		req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &transportError{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return nil, &transportError{err: err}
	}
	fields := parseTokenBody(resp.Header.Get("Content-Type"), body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 || str(fields["error"]) != "" {
		return nil, &oauth2.RetrieveError{
			Response: resp, Body: body,
			ErrorCode: str(fields["error"]), ErrorDescription: str(fields["error_description"]), ErrorURI: str(fields["error_uri"]),
		}
	}
	if fields == nil {
		return nil, fmt.Errorf("OAuth token response is not JSON")
	}
	at := str(fields[o.TokenField])
	if at == "" {
		return nil, fmt.Errorf("OAuth token response missing '%s'", o.TokenField)
	}
	tt := str(fields[o.TokenTypeField])
	if tt == "" {
		tt = o.DefaultTokenType
	}
	return &grantResult{AccessToken: at, TokenType: tt, RefreshToken: str(fields["refresh_token"]), ExpiresIn: expiresIn(fields[o.ExpiresInField])}, nil
}

// parseTokenBody reads a JSON object, or a form-encoded body (some
// providers answer that way); nil when neither.
func parseTokenBody(contentType string, body []byte) map[string]any {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" || mt == "text/plain" {
		if vals, err := url.ParseQuery(string(body)); err == nil {
			out := make(map[string]any, len(vals))
			for k := range vals {
				out[k] = vals.Get(k)
			}
			return out
		}
	}
	var out map[string]any
	if json.Unmarshal(body, &out) != nil {
		return nil
	}
	return out
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// expiresIn is the field as an integer; 3600 when missing or unparsable;
// at least 1.
func expiresIn(v any) int {
	n := 3600
	switch x := v.(type) {
	case float64:
		n = int(x)
	case string:
		if i, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			n = i
		} else if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			n = int(f)
		}
	}
	return max(n, 1)
}

// transportError is a failure to reach the endpoint; its text is the
// transport's (URLs and network errors, no form values).
type transportError struct{ err error }

func (e *transportError) Error() string { return "cannot reach the token endpoint: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }
