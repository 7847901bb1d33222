package api

import (
	"context"
	"fmt"
	"math"
	"net"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// The console sign-in's rate limit: failed attempts are counted per client
// address (the connection's peer: X-Forwarded-For is not trusted, so a
// client cannot pose as many) in fixed windows of SignInWindow, by a
// quota.Counter over the shared session bucket, so every api replica
// counts the same attempts. Once an address has SignInFailures failures in
// a window, every attempt from it, with any key, is refused with 429 and
// Retry-After until the window ends.

// signInSubject is the counter subject of the request's client address.
func signInSubject(c echo.Context) string {
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	return "console-sign-in-failures:" + host
}

// signInAllowed refuses an address that used up its failures in the
// current window.
func (s *Service) signInAllowed(ctx context.Context, subject string) error {
	d, err := s.signIns.Peek(ctx, subject, s.cfg.SignInFailures, s.cfg.SignInWindow)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the sign-in could not be checked: try again in a moment")
	}
	if d.Allowed {
		return nil
	}
	wait := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
	return &bus.Error{Code: bus.CodeRateLimited, Details: map[string]any{"retry_after_seconds": wait},
		Message: fmt.Sprintf("too many failed sign-ins from your address: try again in %d seconds, with the API key you were given", wait)}
}

// signInFailed counts one failed attempt of the address.
func (s *Service) signInFailed(ctx context.Context, subject string) {
	if _, err := s.signIns.Take(ctx, subject, math.MaxInt, s.cfg.SignInWindow); err != nil {
		s.log.Warn("a failed console sign-in was not counted", observability.Err(err))
	}
}
