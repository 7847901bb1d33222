package demo

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
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
		sub, err := "", fmt.Errorf("no bearer token")
		if ok {
			sub, err = b.verify(tok)
		}
		if err != nil {
			challenge := `Bearer resource_metadata="` + strings.TrimSuffix(b.Resource, "/mcp") + MetadataPath + `"`
			if ok {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
			return
		}
		b.mu.Lock()
		b.subjects = append(b.subjects, sub)
		b.mu.Unlock()
		r.Header.Set(SubjectHeader, sub)
		next.ServeHTTP(w, r)
	})
}

// verify checks a JWT access token and returns its subject.
func (b *BearerAuth) verify(tok string) (string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("not a JWT")
	}
	var hdr struct{ Alg, Kid string }
	if err := decodeSegment(parts[0], &hdr); err != nil || hdr.Alg != "RS256" {
		return "", fmt.Errorf("unsupported JWT header")
	}
	key, err := b.key(hdr.Kid)
	if err != nil {
		return "", err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", fmt.Errorf("bad signature encoding")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return "", fmt.Errorf("bad signature")
	}
	var c struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		Aud any    `json:"aud"`
		Exp int64  `json:"exp"`
		Jti string `json:"jti"`
	}
	if err := decodeSegment(parts[1], &c); err != nil {
		return "", fmt.Errorf("bad claims")
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
		return "", fmt.Errorf("wrong issuer")
	case !audienceHas(c.Aud, b.Resource):
		return "", fmt.Errorf("token not for this resource")
	case c.Exp <= time.Now().Unix():
		return "", fmt.Errorf("token expired")
	case refused:
		return "", fmt.Errorf("token expired")
	}
	return c.Sub, nil
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
