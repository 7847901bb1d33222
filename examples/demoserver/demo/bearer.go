package demo

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// SubjectHeader is the request header BearerAuth sets to the token's
// subject (whoami shows it); a client-sent value is dropped.
const SubjectHeader = "X-Demo-Oauth-Subject"

// BearerAuth makes the demo server an OAuth-protected MCP server (MCP
// authorization, RFC 9728): a request to /mcp without a valid access token
// of Issuer for Resource gets 401 with WWW-Authenticate: Bearer
// resource_metadata=…; the metadata is served at
// /.well-known/oauth-protected-resource/mcp. Tokens are JWTs (RS256)
// checked against the issuer's JWKS: signature, iss, aud (Resource), exp.
//
// POST /debug/reject-tokens-seen makes every token accepted so far invalid
// (a test's way to make the tokens in use expire now);
// GET /debug/token-subjects lists the subjects of the accepted requests
// in order.
type BearerAuth struct {
	Issuer   string
	Resource string   // the MCP endpoint's URL
	Scopes   []string // scopes_supported
	// ToolScopes makes tools need a scope (tool name → scope): a
	// tools/call of such a tool with a token lacking it is answered 403
	// with Bearer error="insufficient_scope" and that scope (a step-up),
	// and the 401 challenge asks for the scopes no tool needs.
	ToolScopes map[string]string
	// Client fetches the issuer's metadata and keys. Defaults to
	// http.DefaultClient.
	Client *http.Client

	mu       sync.Mutex
	keys     map[string]*rsa.PublicKey
	seen     map[string]bool // jti of accepted tokens
	rejected map[string]bool // jti refused from now on
	subjects []string
}

// MetadataPath is where the protected-resource metadata is served.
const MetadataPath = "/.well-known/oauth-protected-resource/mcp"

// Routes adds the metadata and debug routes to mux.
func (b *BearerAuth) Routes(mux *http.ServeMux) {
	mux.HandleFunc(MetadataPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"resource": b.Resource, "authorization_servers": []string{b.Issuer},
			"scopes_supported": b.Scopes, "bearer_methods_supported": []string{"header"},
		})
	})
	mux.HandleFunc("/debug/reject-tokens-seen", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b.mu.Lock()
		if b.rejected == nil {
			b.rejected = map[string]bool{}
		}
		for jti := range b.seen {
			b.rejected[jti] = true
		}
		b.mu.Unlock()
	})
	mux.HandleFunc("/debug/token-subjects", func(w http.ResponseWriter, _ *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		_ = json.NewEncoder(w).Encode(b.subjects)
	})
}

// Wrap guards next.
func (b *BearerAuth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(SubjectHeader)
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sub, scopes, err := "", []string(nil), fmt.Errorf("no bearer token")
		if ok {
			sub, scopes, err = b.verify(tok)
		}
		metadata := `resource_metadata="` + strings.TrimSuffix(b.Resource, "/mcp") + MetadataPath + `"`
		if err != nil {
			challenge := `Bearer ` + metadata
			if base := b.baseScopes(); base != "" {
				challenge += `, scope="` + base + `"`
			}
			if ok {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if need := b.toolScope(r); need != "" && !slices.Contains(scopes, need) {
			w.Header().Set("WWW-Authenticate", `Bearer `+metadata+`, scope="`+need+`", error="insufficient_scope"`)
			http.Error(w, "forbidden: this tool needs scope "+need, http.StatusForbidden)
			return
		}
		b.mu.Lock()
		b.subjects = append(b.subjects, sub)
		b.mu.Unlock()
		r.Header.Set(SubjectHeader, sub)
		next.ServeHTTP(w, r)
	})
}

// baseScopes are the scopes supported that no tool of ToolScopes needs.
func (b *BearerAuth) baseScopes() string {
	if len(b.ToolScopes) == 0 {
		return ""
	}
	var out []string
	for _, sc := range b.Scopes {
		needed := false
		for _, v := range b.ToolScopes {
			needed = needed || v == sc
		}
		if !needed {
			out = append(out, sc)
		}
	}
	return strings.Join(out, " ")
}

// toolScope is the scope the tools/call in r's body needs ("" for none or
// another request); the body is left readable.
func (b *BearerAuth) toolScope(r *http.Request) string {
	if len(b.ToolScopes) == 0 || r.Method != http.MethodPost {
		return ""
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return ""
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &msg) != nil || msg.Method != "tools/call" {
		return ""
	}
	return b.ToolScopes[msg.Params.Name]
}

// verify checks a JWT access token and returns its subject and scopes.
func (b *BearerAuth) verify(tok string) (string, []string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", nil, fmt.Errorf("not a JWT")
	}
	var hdr struct{ Alg, Kid string }
	if err := decodeSegment(parts[0], &hdr); err != nil || hdr.Alg != "RS256" {
		return "", nil, fmt.Errorf("unsupported JWT header")
	}
	key, err := b.key(hdr.Kid)
	if err != nil {
		return "", nil, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", nil, fmt.Errorf("bad signature encoding")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return "", nil, fmt.Errorf("bad signature")
	}
	var c struct {
		Iss   string `json:"iss"`
		Sub   string `json:"sub"`
		Aud   any    `json:"aud"`
		Exp   int64  `json:"exp"`
		Jti   string `json:"jti"`
		Scope string `json:"scope"`
	}
	if err := decodeSegment(parts[1], &c); err != nil {
		return "", nil, fmt.Errorf("bad claims")
	}
	b.mu.Lock()
	refused := b.rejected[c.Jti]
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[c.Jti] = true
	b.mu.Unlock()
	switch {
	case c.Iss != b.Issuer:
		return "", nil, fmt.Errorf("wrong issuer")
	case !audienceHas(c.Aud, b.Resource):
		return "", nil, fmt.Errorf("token not for this resource")
	case c.Exp <= time.Now().Unix():
		return "", nil, fmt.Errorf("token expired")
	case refused:
		return "", nil, fmt.Errorf("token expired")
	}
	return c.Sub, strings.Fields(c.Scope), nil
}

func audienceHas(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, v := range a {
			if v == want {
				return true
			}
		}
	}
	return false
}

func decodeSegment(seg string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// key returns the issuer's RSA key kid, fetching the JWKS when unknown.
func (b *BearerAuth) key(kid string) (*rsa.PublicKey, error) {
	b.mu.Lock()
	k := b.keys[kid]
	b.mu.Unlock()
	if k != nil {
		return k, nil
	}
	hc := b.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	var md struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(hc, b.Issuer+"/.well-known/openid-configuration", &md); err != nil || md.JWKSURI == "" {
		return nil, fmt.Errorf("cannot read the issuer's metadata")
	}
	var set struct {
		Keys []struct{ Kty, Kid, N, E string } `json:"keys"`
	}
	if err := getJSON(hc, md.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("cannot read the issuer's keys")
	}
	keys := map[string]*rsa.PublicKey{}
	for _, j := range set.Keys {
		if j.Kty != "RSA" {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(j.N)
		e, err2 := base64.RawURLEncoding.DecodeString(j.E)
		if err1 != nil || err2 != nil {
			continue
		}
		keys[j.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	b.mu.Lock()
	b.keys = keys
	b.mu.Unlock()
	if k := keys[kid]; k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("unknown signing key")
}

func getJSON(hc *http.Client, u string, v any) error {
	resp, err := hc.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
