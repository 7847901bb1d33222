package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// Roles.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// Caller is the authenticated identity of a request.
type Caller struct {
	UserID string
	Role   string
	// VirtualServers are the only virtual servers the key may use
	// (api.keys[].virtual_servers); nil: any, and the whole catalog.
	VirtualServers []string
}

const callerKey = "mcpbus.caller"

type apiKey struct {
	sum            [sha256.Size]byte
	userID         string
	role           string
	virtualServers []string
}

// authenticator checks bearer keys against their SHA-256.
type authenticator struct {
	keys []apiKey
}

func newAuthenticator(keys []config.APIKey) (*authenticator, error) {
	a := &authenticator{}
	for i, k := range keys {
		raw, err := hex.DecodeString(k.SHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("api: api.keys[%d].sha256 must be 64 hex characters", i)
		}
		var ak apiKey
		copy(ak.sum[:], raw)
		ak.userID, ak.role, ak.virtualServers = k.UserID, k.Role, k.VirtualServers
		a.keys = append(a.keys, ak)
	}
	return a, nil
}

// lookup compares the key's digest against every configured one in
// constant time.
func (a *authenticator) lookup(bearer string) (Caller, bool) {
	sum := sha256.Sum256([]byte(bearer))
	return a.lookupSum(sum[:])
}

// lookupSum is lookup by the key's SHA-256 (a console session's key).
func (a *authenticator) lookupSum(sum []byte) (Caller, bool) {
	var found *apiKey
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].sum[:]) == 1 {
			found = &a.keys[i]
		}
	}
	if found == nil {
		return Caller{}, false
	}
	return Caller{UserID: found.userID, Role: found.role, VirtualServers: found.virtualServers}, true
}

func (s *Service) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		caller, sess, err := s.identifySession(c.Request())
		if err != nil {
			return err
		}
		c.Set(callerKey, caller)
		if sess != nil {
			c.Set(sessionCtxKey, sess)
		}
		return next(c)
	}
}

// identify is the caller of r: the user of its bearer key or of its
// console session cookie (session.go), or the admin "default" when no keys
// are configured (REST and the MCP endpoint alike).
func (s *Service) identify(r *http.Request) (Caller, error) {
	c, _, err := s.identifySession(r)
	return c, err
}

// identifySession is identify, also returning the console session the
// request was authenticated by (nil for a bearer key or key-less mode).
func (s *Service) identifySession(r *http.Request) (Caller, *session, error) {
	if len(s.auth.keys) == 0 {
		return Caller{UserID: bus.DefaultScopeID, Role: RoleAdmin}, nil, nil
	}
	header := r.Header.Get(echo.HeaderAuthorization)
	if header == "" {
		if cookie, err := r.Cookie(SessionCookie); err == nil && cookie.Value != "" {
			return s.fromSession(r, cookie.Value)
		}
	}
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return Caller{}, nil, bus.Errorf(bus.CodeUnauthorized, "authentication required: send Authorization: Bearer <api key>")
	}
	caller, ok := s.auth.lookup(strings.TrimSpace(token))
	if !ok {
		return Caller{}, nil, bus.Errorf(bus.CodeUnauthorized, "the API key is not valid")
	}
	return caller, nil, nil
}

func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if callerOf(c).Role != RoleAdmin {
			return bus.Errorf(bus.CodeForbidden, "admin privileges required")
		}
		return next(c)
	}
}

func callerOf(c echo.Context) Caller {
	caller, _ := c.Get(callerKey).(Caller)
	return caller
}

// browserGuard applies the browser rules of package httpguard to every
// route (and to /mcp once it is served here): JSON content type on POST,
// PUT and PATCH; loopback Host and same-origin Origin without API keys.
func (s *Service) browserGuard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ref := s.guard.Check(c.Request()); ref != nil {
			return &statusError{status: ref.Status, err: ref.Err}
		}
		return next(c)
	}
}
