package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpbus/mcpbus/pkg/headers"
)

var (
	// ErrSessionExpired reports that an http or sse server no longer knows
	// the session (HTTP 404, or 400 "unknown/invalid session"). The Client
	// is unusable afterwards: close it, connect again once and retry.
	ErrSessionExpired = errors.New("mcp session expired")
	// ErrConnectionLost reports that the transport went away underneath the
	// client, typically a stdio child that exited. Close and reconnect.
	ErrConnectionLost = errors.New("mcp connection lost")
	// ErrClosed reports a call on a Client after Close.
	ErrClosed = errors.New("mcp client closed")
	// ErrAuthorizationRequired reports an HTTP/SSE server's 401: it wants
	// (another) access token. The Client stays usable.
	ErrAuthorizationRequired = transport.ErrAuthorizationRequired
	// ErrForbidden reports an HTTP/SSE server's 403 with a WWW-Authenticate
	// challenge (e.g. Bearer error="insufficient_scope"): the token is
	// valid but not enough. The error is a *ForbiddenError; the Client
	// stays usable.
	ErrForbidden = errors.New("the mcp server refused the access token for this request (HTTP 403)")
)

// ForbiddenError is a 403 with its WWW-Authenticate values (parameters
// such as scope and error; a challenge carries no secret), for the
// caller to read the scope the server wants.
type ForbiddenError struct {
	Challenges []string
}

func (e *ForbiddenError) Error() string { return ErrForbidden.Error() }

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// wrapCtx is wrap for errors of calls bounded by ctx: when ctx has ended, the
// result also matches ctx's error (context.DeadlineExceeded or
// context.Canceled), whatever the transport made of it.
func (c *Client) wrapCtx(ctx context.Context, op string, err error, secrets []string) error {
	cerr := ctx.Err()
	if _, ok := ctx.Deadline(); ok && cerr == nil && strings.Contains(err.Error(), sseDeadlineMsg) {
		// The SSE transport arms its own timer with the time left until
		// ctx's deadline, and it may fire a moment before ctx is done.
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return c.wrap(op, err, secrets)
}

// sseDeadlineMsg starts mcp-go's SSE response timeout error.
const sseDeadlineMsg = "timeout waiting for SSE response"

// wrap names the server and the operation, adds the sentinel that classifies
// err, and keeps secrets out of the message: the values the client knows
// (headers, env, URL userinfo and query; secrets are this call's header
// values) become "***" and every URL loses its userinfo and query string.
func (c *Client) wrap(op string, err error, secrets []string) error {
	if c.streamTrip.Load() && !errors.Is(err, ErrResponseTooLarge) {
		// The session's stream was cut at the limit: that is why it broke.
		err = fmt.Errorf("%w: %w", c.tooLarge(), err)
	}
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrSessionExpired), errors.Is(err, ErrConnectionLost):
	case c.closed.Load():
		// Whatever broke, Close did it.
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case c.kind != TransportStdio && isSessionExpired(err):
		err = fmt.Errorf("%w: %w", ErrSessionExpired, err)
	case errors.Is(err, transport.ErrTransportClosed),
		c.kind == TransportStdio && (errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)):
		// The stdio child exited: its stdout reached EOF, or writing to its
		// stdin failed.
		err = fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	wrapped := cutBodies(fmt.Errorf("mcp server %q: %s: %w", c.server, op, err))
	return c.redactor.With(secrets...).Error(wrapped)
}

// upstreamBody matches where mcp-go quotes what an upstream sent in its
// errors: "request failed with status 502: <body>", the same for
// notifications, and "response should contain RPC id: <decoded body>".
var upstreamBody = regexp.MustCompile(`(?s)((?:request|notification) failed with status \d+|response should contain RPC id): .*`)

// cutBodies drops the upstream's response body from err's message (it
// ends the message): the body of an internal service must not reach users
// or logs, and the status code is what matters. The result still unwraps
// to err.
func cutBodies(err error) error {
	msg := err.Error()
	out := upstreamBody.ReplaceAllString(msg, "$1")
	if out == msg {
		return err
	}
	return &bodyCutError{msg: out, err: err}
}

// bodyCutError is err with the upstream's body cut from its message.
type bodyCutError struct {
	msg string
	err error
}

func (e *bodyCutError) Error() string { return e.msg }
func (e *bodyCutError) Unwrap() error { return e.err }

// sessionGone matches the messages servers use for a forgotten session:
// "Invalid session ID", "Bad Request: No valid session ID provided",
// "Session not found", "Session terminated", "unknown session".
var sessionGone = regexp.MustCompile(`(?i)\b(unknown|invalid|no valid|expired)\s+session\b|\bsession(\s+id)?\s+(not found|expired|terminated|unknown|is invalid|is unknown)\b`)

// isSessionExpired recognizes a server that forgot the session: mcp-go's
// ErrSessionTerminated (HTTP 404 on streamable HTTP), a 404 on the SSE
// message endpoint, or a 400-style "unknown/invalid session" message.
func isSessionExpired(err error) bool {
	if errors.Is(err, transport.ErrSessionTerminated) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "request failed with status 404") || sessionGone.MatchString(msg)
}

// stderrError carries the stderr tail of a stdio child that failed to
// start. The tail is not part of the message: it is upstream-controlled
// text that plain users must not see (see StderrTail).
type stderrError struct {
	err  error
	tail string
}

func (e *stderrError) Error() string { return e.err.Error() }
func (e *stderrError) Unwrap() error { return e.err }

// StderrTail returns the last stderr lines (at most 512 bytes, on one line,
// redacted like the rest of this package's output) of a stdio child whose
// Connect failed with err, or "" when err carries none. They are for
// operators (logs, the admin's server status), never for errors shown to
// users.
func StderrTail(err error) string {
	var se *stderrError
	if errors.As(err, &se) {
		return se.tail
	}
	return ""
}

// validateHeaders rejects header names that are not HTTP tokens and values
// that cannot be sent as they are (the rules of package headers). Errors
// name the header and the reason, never the value.
func validateHeaders(h map[string]string) error {
	for k, v := range h {
		if !headers.ValidName(k) {
			return fmt.Errorf("invalid HTTP header name %q", k)
		}
		if reason := headers.Check(v); reason != "" {
			return fmt.Errorf("invalid value for HTTP header %q: it %s", k, reason)
		}
	}
	return nil
}
