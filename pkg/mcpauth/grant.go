package mcpauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client authentication methods at the token endpoint.
const (
	AuthNone   = "none"
	AuthPost   = "client_secret_post"
	AuthBasic  = "client_secret_basic"
	grantCode  = "authorization_code"
	grantRenew = "refresh_token"
)

// Client is how mcpbus identifies itself to an authorization server.
type Client struct {
	ID         string `json:"client_id"`
	Secret     string `json:"client_secret,omitempty"`
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"` // none, client_secret_post, client_secret_basic
}

// ChooseAuthMethod picks how a client with a secret authenticates:
// client_secret_basic when the server lists it (or lists nothing, its
// default), else client_secret_post; none without a secret.
func ChooseAuthMethod(md *ServerMetadata, hasSecret bool) string {
	if !hasSecret {
		return AuthNone
	}
	if len(md.TokenEndpointAuthMethodsSupported) == 0 || contains(md.TokenEndpointAuthMethodsSupported, AuthBasic) {
		return AuthBasic
	}
	return AuthPost
}

// Register registers a client (RFC 7591) for redirectURI: a public client
// (token_endpoint_auth_method none) when the server accepts it, else a
// client_secret_post one.
func Register(ctx context.Context, hc *http.Client, md *ServerMetadata, clientName, redirectURI, scope string) (*Client, error) {
	if md.RegistrationEndpoint == "" {
		return nil, errors.New("the authorization server offers no dynamic client registration and no client_id is configured")
	}
	method := AuthNone
	if len(md.TokenEndpointAuthMethodsSupported) > 0 && !contains(md.TokenEndpointAuthMethodsSupported, AuthNone) {
		method = AuthPost
	}
	req := map[string]any{
		"client_name":                clientName,
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{grantCode, grantRenew},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
	}
	if scope != "" {
		req["scope"] = scope
	}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("the registration_endpoint is not a valid URL")
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the registration endpoint: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the registration endpoint refused the registration (HTTP %d%s)", resp.StatusCode, errorCode(resp))
	}
	var out Client
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(&out); err != nil || out.ID == "" {
		return nil, errors.New("the registration endpoint's answer has no client_id")
	}
	if out.AuthMethod == "" {
		out.AuthMethod = method
	}
	return &out, nil
}

// errorCode is ", error <code>" from an OAuth error body, or "".
func errorCode(resp *http.Response) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(&e) != nil || e.Error == "" || len(e.Error) > 64 {
		return ""
	}
	return ", error " + e.Error
}

// NewVerifier returns a PKCE code verifier (32 random bytes, base64url).
func NewVerifier() string { return RandomToken() }

// RandomToken returns 32 random bytes, base64url without padding.
func RandomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Challenge256 is the S256 code challenge of verifier.
func Challenge256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// AuthRequest is one authorization request.
type AuthRequest struct {
	Client      Client
	RedirectURI string
	State       string
	Verifier    string
	Scope       string
	Resource    string
}

// AuthorizeURL is the authorization endpoint URL for r (code flow, PKCE
// S256, resource).
func AuthorizeURL(md *ServerMetadata, r AuthRequest) (string, error) {
	u, err := url.Parse(md.AuthorizationEndpoint)
	if err != nil || u.Host == "" {
		return "", errors.New("the authorization_endpoint is not a valid URL")
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", r.Client.ID)
	q.Set("redirect_uri", r.RedirectURI)
	q.Set("state", r.State)
	q.Set("code_challenge", Challenge256(r.Verifier))
	q.Set("code_challenge_method", "S256")
	if r.Scope != "" {
		q.Set("scope", r.Scope)
	}
	if r.Resource != "" {
		q.Set("resource", r.Resource)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// CheckIssuer applies RFC 9207 to an authorization response: an iss
// parameter must equal the issuer; a missing one is refused when the
// server advertised authorization_response_iss_parameter_supported.
func CheckIssuer(md *ServerMetadata, iss string) error {
	if iss == "" {
		if md.IssParameterSupported {
			return errors.New("the authorization response lacks the iss parameter its server promised")
		}
		return nil
	}
	if iss != md.Issuer {
		return errors.New("the authorization response comes from another issuer than the one the flow started with")
	}
	return nil
}

// Token is a token endpoint's answer.
type Token struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token,omitempty"`
	ExpiresIn    int    `json:"expires_in,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

// TokenError is a token endpoint's refusal: the status and the OAuth
// error code only (the body is never kept).
type TokenError struct {
	Status int
	Code   string // e.g. invalid_grant
}

func (e *TokenError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("the token endpoint refused the request (HTTP %d, error %s)", e.Status, e.Code)
	}
	return fmt.Sprintf("the token endpoint refused the request (HTTP %d)", e.Status)
}

// Exchange redeems an authorization code (with the PKCE verifier and the
// resource).
func Exchange(ctx context.Context, hc *http.Client, md *ServerMetadata, c Client, code, verifier, redirectURI, resource string) (*Token, error) {
	form := url.Values{"grant_type": {grantCode}, "code": {code}, "code_verifier": {verifier}, "redirect_uri": {redirectURI}}
	if resource != "" {
		form.Set("resource", resource)
	}
	return postToken(ctx, hc, md.TokenEndpoint, c, form)
}

// Refresh spends a refresh token (with the resource).
func Refresh(ctx context.Context, hc *http.Client, tokenEndpoint string, c Client, refreshToken, resource string) (*Token, error) {
	form := url.Values{"grant_type": {grantRenew}, "refresh_token": {refreshToken}}
	if resource != "" {
		form.Set("resource", resource)
	}
	return postToken(ctx, hc, tokenEndpoint, c, form)
}

// Revoke revokes token at the revocation endpoint (RFC 7009); hint is
// "refresh_token" or "access_token". No endpoint: nothing to do.
func Revoke(ctx context.Context, hc *http.Client, revocationEndpoint string, c Client, token, hint string) error {
	if revocationEndpoint == "" || token == "" {
		return nil
	}
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	resp, err := postForm(ctx, hc, revocationEndpoint, c, form)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &TokenError{Status: resp.StatusCode}
	}
	return nil
}

func postToken(ctx context.Context, hc *http.Client, endpoint string, c Client, form url.Values) (*Token, error) {
	resp, err := postForm(ctx, hc, endpoint, c, form)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if err != nil {
		return nil, fmt.Errorf("cannot read the token endpoint's answer: %w", err)
	}
	var t struct {
		Token
		ExpiresIn json.Number `json:"expires_in"`
		Error     string      `json:"error"`
	}
	jerr := json.Unmarshal(body, &t)
	if resp.StatusCode != http.StatusOK || t.Error != "" {
		code := t.Error
		if len(code) > 64 {
			code = ""
		}
		return nil, &TokenError{Status: resp.StatusCode, Code: code}
	}
	if jerr != nil || t.AccessToken == "" {
		return nil, errors.New("the token endpoint's answer has no access_token")
	}
	out := t.Token
	if n, err := t.ExpiresIn.Int64(); err == nil {
		out.ExpiresIn = int(n)
	}
	if out.TokenType == "" || strings.EqualFold(out.TokenType, "bearer") {
		out.TokenType = "Bearer"
	}
	return &out, nil
}

// postForm posts form with c's client authentication.
func postForm(ctx context.Context, hc *http.Client, endpoint string, c Client, form url.Values) (*http.Response, error) {
	switch c.AuthMethod {
	case AuthBasic:
	case AuthPost:
		form.Set("client_id", c.ID)
		form.Set("client_secret", c.Secret)
	default:
		form.Set("client_id", c.ID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errors.New("the token endpoint is not a valid URL")
	}
	if c.AuthMethod == AuthBasic {
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			// url.Error quotes the URL only; the form is in the body.
			return nil, fmt.Errorf("cannot reach the token endpoint: %w", ue.Err)
		}
		return nil, fmt.Errorf("cannot reach the token endpoint: %w", err)
	}
	return resp, nil
}
