package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// The console's sign-in: an API key is exchanged once for a session cookie
// (HttpOnly, SameSite=Strict, Secure under TLS, expiring) whose SHA-256
// keys an entry in the shared session bucket, so any api replica accepts
// it. A request authenticated by the cookie is the key's user for every
// route (the same handlers and authorization as a bearer key); a
// state-changing one must also carry the session's CSRF token.

const (
	// SessionCookie is the console's session cookie.
	SessionCookie = "mcpbus_console"
	// CSRFHeader carries the session's CSRF token on every change.
	CSRFHeader = "X-CSRF-Token"
)

// session is one console sign-in, as stored in the bucket. KeySHA256 is
// the key it was made from: removing the key from api.keys ends it.
type session struct {
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"`
	KeySHA256 string    `json:"key_sha256"`
	CSRF      string    `json:"csrf"`
	ExpiresAt time.Time `json:"expires_at"`
}

// sessionReply is the body of the console session routes.
type sessionReply struct {
	UserID    string     `json:"user_id"`
	Role      string     `json:"role"`
	Keyless   bool       `json:"keyless"`
	CSRFToken string     `json:"csrf_token,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// openSessions opens (or creates) the console session bucket.
func (s *Service) openSessions() (jetstream.KeyValue, error) {
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return nil, fmt.Errorf("api: jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := bus.ConsoleSessionsKV(ctx, js, s.deps.Names, s.cfg.MCP.SessionReplicas, s.cfg.ConsoleSessionTTL)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return kv, nil
}

// sessionRoutes registers sign-in, the signed-in identity and sign-out.
func (s *Service) sessionRoutes(e *echo.Echo) {
	e.POST("/api/console/session", s.signIn)
	e.GET("/api/console/session", s.currentSession, s.authenticate)
	e.DELETE("/api/console/session", s.signOut, s.authenticate)
}

// randomToken is 32 random bytes, base64url.
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// sessionKey is the bucket key of a cookie value: its hex SHA-256, so the
// bucket never holds a usable cookie.
func sessionKey(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

func (s *Service) signIn(c echo.Context) error {
	if len(s.auth.keys) == 0 {
		return c.JSON(http.StatusOK, sessionReply{UserID: bus.DefaultScopeID, Role: RoleAdmin, Keyless: true})
	}
	var body struct {
		APIKey string `json:"api_key"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	key := strings.TrimSpace(body.APIKey)
	if key == "" {
		return bus.Errorf(bus.CodeInvalidRequest, "api_key is required: paste the API key you were given")
	}
	limit := signInSubject(c)
	if err := s.signInAllowed(c.Request().Context(), limit); err != nil {
		return err
	}
	caller, ok := s.auth.lookup(key)
	if !ok {
		s.signInFailed(c.Request().Context(), limit)
		return bus.Errorf(bus.CodeUnauthorized, "the API key is not valid: check it with the operator who gave it to you")
	}
	cookie, err := randomToken()
	if err != nil {
		return bus.Wrap(bus.CodeInternal, err, "the sign-in could not be created")
	}
	csrf, err := randomToken()
	if err != nil {
		return bus.Wrap(bus.CodeInternal, err, "the sign-in could not be created")
	}
	sum := sha256.Sum256([]byte(key))
	sess := session{UserID: caller.UserID, Role: caller.Role, KeySHA256: hex.EncodeToString(sum[:]), CSRF: csrf,
		ExpiresAt: time.Now().Add(s.cfg.ConsoleSessionTTL).UTC().Truncate(time.Second)}
	raw, _ := json.Marshal(sess)
	ctx, cancel := s.busCtx(c)
	defer cancel()
	if _, err := s.sessions.Put(ctx, sessionKey(cookie), raw); err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the sign-in could not be stored: try again in a moment")
	}
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.Request().TLS != nil, MaxAge: int(s.cfg.ConsoleSessionTTL / time.Second), Expires: sess.ExpiresAt})
	c.Set(callerKey, caller)
	s.auditSession(c, "console_sign_in")
	return c.JSON(http.StatusOK, sessionReply{UserID: sess.UserID, Role: sess.Role, CSRFToken: csrf, ExpiresAt: &sess.ExpiresAt})
}

func (s *Service) currentSession(c echo.Context) error {
	caller := callerOf(c)
	reply := sessionReply{UserID: caller.UserID, Role: caller.Role, Keyless: len(s.auth.keys) == 0}
	if sess, ok := c.Get(sessionCtxKey).(*session); ok {
		reply.CSRFToken, reply.ExpiresAt = sess.CSRF, &sess.ExpiresAt
	}
	return c.JSON(http.StatusOK, reply)
}

func (s *Service) signOut(c echo.Context) error {
	if cookie, err := c.Cookie(SessionCookie); err == nil && cookie.Value != "" {
		ctx, cancel := s.busCtx(c)
		defer cancel()
		if err := s.sessions.Delete(ctx, sessionKey(cookie.Value)); err != nil {
			return bus.Wrap(bus.CodeUnavailable, err, "the sign-out could not be stored: try again in a moment")
		}
		s.auditSession(c, "console_sign_out")
	}
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.Request().TLS != nil, MaxAge: -1})
	return c.NoContent(http.StatusNoContent)
}

// auditSession records a sign-in or sign-out with the signed-in identity.
func (s *Service) auditSession(c echo.Context, action string) {
	s.deps.Audit.Write(c.Request().Context(), audit.Record{Kind: audit.KindConfig, User: callerOf(c).UserID, Action: action,
		RequestID: c.Response().Header().Get(echo.HeaderXRequestID)})
}

const sessionCtxKey = "mcpbus.console_session"

// errCSRF refuses a change made with the session cookie but without its
// CSRF token.
var errCSRF = &statusError{status: http.StatusForbidden, err: bus.Errorf(bus.CodeForbidden,
	"the request has no valid "+CSRFHeader+" header: reload the console and try again")}

// fromSession authenticates r by its session cookie: the session must
// exist, be unexpired and come from a key still configured; a request
// that is not GET, HEAD or OPTIONS must carry the session's CSRF token and
// must not come from another site.
func (s *Service) fromSession(r *http.Request, value string) (Caller, *session, error) {
	unauth := bus.Errorf(bus.CodeUnauthorized, "the console session has ended: sign in again with your API key")
	if s.sessions == nil {
		return Caller{}, nil, unauth
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	entry, err := s.sessions.Get(ctx, sessionKey(value))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Caller{}, nil, unauth
	}
	if err != nil {
		s.log.Warn("console session lookup failed", observability.Err(err))
		return Caller{}, nil, bus.Wrap(bus.CodeUnavailable, err, "the console session could not be checked: try again in a moment")
	}
	var sess session
	if err := json.Unmarshal(entry.Value(), &sess); err != nil || !time.Now().Before(sess.ExpiresAt) {
		return Caller{}, nil, unauth
	}
	sum, err := hex.DecodeString(sess.KeySHA256)
	if err != nil {
		return Caller{}, nil, unauth
	}
	caller, ok := s.auth.lookupSum(sum)
	if !ok {
		return Caller{}, nil, unauth
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		got := r.Header.Get(CSRFHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 || crossSite(r) {
			return Caller{}, nil, errCSRF
		}
	}
	return caller, &sess, nil
}

// crossSite reports a request that a browser marked as coming from another
// site or origin (Sec-Fetch-Site, or an Origin whose host is not the
// request's).
func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	host, ok := strings.CutPrefix(origin, "https://")
	if !ok {
		if host, ok = strings.CutPrefix(origin, "http://"); !ok {
			return true
		}
	}
	return !strings.EqualFold(host, r.Host)
}
