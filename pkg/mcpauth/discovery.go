package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxMetadata bounds a metadata document or registration response.
const maxMetadata = 1 << 20

// Challenge is a Bearer challenge from WWW-Authenticate.
type Challenge struct {
	ResourceMetadata string // RFC 9728 resource_metadata URL
	Scope            string
	Error            string // e.g. invalid_token, insufficient_scope
}

// ParseChallenge reads the Bearer challenge among the WWW-Authenticate
// values; ok is false when there is none.
func ParseChallenge(values []string) (c Challenge, ok bool) {
	for _, v := range values {
		rest, found := cutScheme(v, "bearer")
		if !found {
			continue
		}
		for k, val := range authParams(rest) {
			switch k {
			case "resource_metadata":
				c.ResourceMetadata = val
			case "scope":
				c.Scope = val
			case "error":
				c.Error = val
			}
		}
		return c, true
	}
	return Challenge{}, false
}

// cutScheme finds scheme (case-insensitive) at the start of v or after a
// comma and returns what follows it.
func cutScheme(v, scheme string) (string, bool) {
	lower := strings.ToLower(v)
	for i := 0; i < len(lower); {
		j := strings.Index(lower[i:], scheme)
		if j < 0 {
			return "", false
		}
		j += i
		end := j + len(scheme)
		before := strings.TrimSpace(lower[:j])
		if (before == "" || strings.HasSuffix(before, ",")) && (end == len(lower) || lower[end] == ' ') {
			return v[end:], true
		}
		i = end
	}
	return "", false
}

// authParams parses `k=v, k="quoted \" v"` pairs; keys are lower-cased.
func authParams(s string) map[string]string {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(strings.TrimSpace(s), ",") {
		s = strings.TrimSpace(s)
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return out
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimSpace(s[eq+1:])
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			val, s = b.String(), s[min(i+1, len(s)):]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = strings.TrimSpace(s[:end]), s[end:]
		}
		if strings.ContainsAny(key, " \t") { // the next scheme started
			return out
		}
		out[key] = val
	}
	return out
}

// ResourceMetadata is RFC 9728 protected-resource metadata.
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is RFC 8414 (or OpenID) authorization-server metadata.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported,omitempty"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported,omitempty"`
}

// Discoverer fetches metadata with HTTP.
type Discoverer struct {
	HTTP *http.Client
}

// ErrNoChallenge: the server answered without asking for authorization.
var ErrNoChallenge = errors.New("the MCP server did not ask for authorization (no 401 with a Bearer challenge)")

// Challenge sends an unauthenticated initialize to the MCP endpoint and
// returns the Bearer challenge of its 401 (or of a 403 insufficient_scope).
// A server that lets initialize through and guards its methods is then
// asked for tools/list (in the session initialize opened, if any), as a
// client's first request after initialize would.
func (d *Discoverer) Challenge(ctx context.Context, mcpURL string) (Challenge, error) {
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpbus","version":"1"}}}`
	ch, session, err := d.probe(ctx, mcpURL, initialize, nil)
	if !errors.Is(err, ErrNoChallenge) {
		return ch, err
	}
	h := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	if session != "" {
		h["Mcp-Session-Id"] = session
	}
	ch, _, err = d.probe(ctx, mcpURL, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, h)
	return ch, err
}

// probe posts one unauthenticated JSON-RPC request and returns the Bearer
// challenge of a 401 or 403, else ErrNoChallenge and the session ID the
// server gave, if any.
func (d *Discoverer) probe(ctx context.Context, mcpURL, body string, extra map[string]string) (Challenge, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mcpURL, strings.NewReader(body))
	if err != nil {
		return Challenge{}, "", fmt.Errorf("the MCP server URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return Challenge{}, "", fmt.Errorf("cannot reach the MCP server: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadata))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return Challenge{}, resp.Header.Get("Mcp-Session-Id"), ErrNoChallenge
	}
	ch, ok := ParseChallenge(resp.Header.Values("WWW-Authenticate"))
	if !ok && resp.StatusCode == http.StatusForbidden {
		return Challenge{}, "", ErrNoChallenge
	}
	return ch, "", nil // a 401 without a header still starts discovery (well-known URLs)
}

// Resource returns the protected-resource metadata of the MCP server at
// mcpURL: from ch.ResourceMetadata when set, else from
// /.well-known/oauth-protected-resource<path> and then
// /.well-known/oauth-protected-resource. The document's resource must be
// the server's URL or a prefix of it on the same origin.
func (d *Discoverer) Resource(ctx context.Context, mcpURL string, ch Challenge) (*ResourceMetadata, error) {
	u, err := url.Parse(mcpURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the MCP server URL is not valid")
	}
	var candidates []string
	if ch.ResourceMetadata != "" {
		candidates = []string{ch.ResourceMetadata}
	} else {
		origin := u.Scheme + "://" + u.Host
		if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
			candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+p)
		}
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	}
	var md ResourceMetadata
	var lastErr error
	for _, c := range candidates {
		if lastErr = d.getJSON(ctx, c, &md); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		return nil, fmt.Errorf("protected-resource metadata: %w", lastErr)
	}
	if len(md.AuthorizationServers) == 0 {
		return nil, errors.New("protected-resource metadata lists no authorization_servers")
	}
	if !ResourceCovers(md.Resource, mcpURL) {
		return nil, fmt.Errorf("protected-resource metadata names resource %q, which is not the MCP server's URL", md.Resource)
	}
	return &md, nil
}

// ResourceCovers reports whether resource identifies the server at
// serverURL: the same scheme and host, and a path that is the server's path
// or a prefix of it ending at a segment boundary.
func ResourceCovers(resource, serverURL string) bool {
	r, err1 := url.Parse(resource)
	s, err2 := url.Parse(serverURL)
	if err1 != nil || err2 != nil || r.Host == "" || r.Fragment != "" {
		return false
	}
	if !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) {
		return false
	}
	rp, sp := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(s.Path, "/")
	return rp == sp || strings.HasPrefix(sp, rp+"/")
}

// AuthServer returns the metadata of issuer, trying RFC 8414 path
// insertion, OpenID Connect path insertion and OpenID Connect path
// appending (for an issuer without a path: the RFC 8414 and the OpenID
// URLs). The document's issuer must equal issuer.
func (d *Discoverer) AuthServer(ctx context.Context, issuer string) (*ServerMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("authorization server %q is not a valid issuer URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	candidates := []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
	}
	if p != "" {
		candidates = append(candidates, origin+p+"/.well-known/openid-configuration")
	}
	var lastErr error
	for _, c := range candidates {
		var md ServerMetadata
		if lastErr = d.getJSON(ctx, c, &md); lastErr != nil {
			continue
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("authorization server metadata at %s names issuer %q, not %q", c, md.Issuer, issuer)
		}
		if md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
			return nil, fmt.Errorf("authorization server %s has no authorization_endpoint or token_endpoint", issuer)
		}
		if len(md.CodeChallengeMethodsSupported) > 0 && !contains(md.CodeChallengeMethodsSupported, "S256") {
			return nil, fmt.Errorf("authorization server %s does not support PKCE with S256", issuer)
		}
		return &md, nil
	}
	return nil, fmt.Errorf("authorization server metadata of %s: %w", issuer, lastErr)
}

// getJSON fetches u into v; a non-200 answer or a body that is not a JSON
// object is an error naming the URL and the status only.
func (d *Discoverer) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%q is not a valid URL", u)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot fetch %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(v); err != nil {
		return fmt.Errorf("%s is not a JSON metadata document", u)
	}
	return nil
}

// SelectScope is the scope to ask for: the challenge's, else the
// resource's scopes_supported, else none ("").
func SelectScope(ch Challenge, rm *ResourceMetadata) string {
	if ch.Scope != "" {
		return ch.Scope
	}
	if rm != nil {
		return strings.Join(rm.ScopesSupported, " ")
	}
	return ""
}

// UniteScopes is the union of space-separated scope lists, in order of
// first appearance, keeping only valid scope tokens (RFC 6749 §3.3: no
// spaces, quotes or backslashes, printable ASCII), so an upstream's
// challenge cannot smuggle anything else into a request or a message.
func UniteScopes(lists ...string) string {
	var out []string
	for _, l := range lists {
		for _, sc := range strings.Fields(l) {
			if validScopeToken(sc) && !contains(out, sc) {
				out = append(out, sc)
			}
		}
	}
	return strings.Join(out, " ")
}

func validScopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
