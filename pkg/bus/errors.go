package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpbus/mcpbus/pkg/redact"
)

// Code is one of the error codes of DESIGN §4.
type Code string

// The error codes.
const (
	CodeInvalidRequest     Code = "invalid_request"
	CodeUnauthorized       Code = "unauthorized"
	CodeForbidden          Code = "forbidden"
	CodeNotFound           Code = "not_found"
	CodeToolDeferred       Code = "tool_deferred"
	CodeGuardrailDenied    Code = "guardrail_denied"
	CodeCredentialsMissing Code = "credentials_missing"
	CodeCredentialsInvalid Code = "credentials_invalid"
	CodeOAuthFailed        Code = "oauth_failed"
	CodeUpstreamError      Code = "upstream_error"
	CodeUpstreamTimeout    Code = "upstream_timeout"
	CodeInitTimeout        Code = "init_timeout"
	CodeConfigError        Code = "config_error"
	CodeUnavailable        Code = "unavailable"
	CodeInternal           Code = "internal"
	// CodeCancelled: the caller cancelled the call (mcpbus.tools.cancel).
	CodeCancelled Code = "cancelled"
	// CodeRateLimited: a cap on calls in flight (per user, per upstream)
	// is reached; retry once a call has ended. REST: 429 with Retry-After.
	CodeRateLimited Code = "rate_limited"
	// CodeToolChanged: the call carried a tool digest that is no longer
	// the definition served (tool pinning); list the tools again. REST 409.
	CodeToolChanged Code = "tool_changed"
)

// HTTPStatus maps a code to the REST API's status; the one place it is decided.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalidRequest:
		return http.StatusBadRequest
	case CodeUnauthorized, CodeAuthRequired:
		return http.StatusUnauthorized
	case CodeForbidden, CodeGuardrailDenied:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeToolDeferred, CodeToolChanged:
		return http.StatusConflict
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeCredentialsMissing, CodeCredentialsInvalid, CodeClientCapabilityMissing:
		return http.StatusUnprocessableEntity
	case CodeOAuthFailed, CodeUpstreamError:
		return http.StatusBadGateway
	case CodeConfigError, CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeUpstreamTimeout, CodeInitTimeout:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// Error is an error with a code that survives NATS. Message is what users see;
// Cause stays in the process and is never serialised.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	Cause   error          `json:"-"`
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error with the same code, so
// errors.Is(err, bus.ErrNotFound) works on rebuilt errors.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
	}
	return false
}

// Errorf builds an *Error with a formatted public message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error with a public message and a private cause. message
// must not quote cause: its text is for the logs (Respond logs it), never
// for the caller; use WrapUser when cause may carry a message written for
// the caller.
func Wrap(code Code, cause error, message string) *Error {
	return &Error{Code: code, Message: message, Cause: cause}
}

// A UserMessager is an error whose UserMessage is written for the caller
// and is safe to show (a launch policy refusal, an egress refusal): it
// names what the caller can fix and carries no path, address, secret or
// driver text. Any other error's text is a cause, for the logs only.
type UserMessager interface {
	error
	UserMessage() string
}

// UserMessage returns the UserMessage of the outermost error in err's chain
// that is a UserMessager, or "" when none is.
func UserMessage(err error) string {
	var um UserMessager
	if errors.As(err, &um) {
		return um.UserMessage()
	}
	return ""
}

// WrapUser builds an *Error whose public message is the user message that
// cause carries (UserMessage), or fallback when it carries none; cause
// stays private either way.
func WrapUser(code Code, cause error, fallback string) *Error {
	return Wrap(code, cause, cmp.Or(UserMessage(cause), fallback))
}

// Redact returns the *Error that err carries (errors.As) as a copy whose
// public message and cause went through r, so neither shows a secret value
// or a URL's credentials; an err without one comes back as r.Error(err).
func Redact(err error, r *redact.Redactor) error {
	var e *Error
	if !errors.As(err, &e) {
		return r.Error(err)
	}
	out := *e
	out.Message, out.Cause = r.String(e.Message), r.Error(e.Cause)
	return &out
}

// Sentinels for errors.Is.
var (
	ErrInvalidRequest  = &Error{Code: CodeInvalidRequest}
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrForbidden       = &Error{Code: CodeForbidden}
	ErrUnavailable     = &Error{Code: CodeUnavailable}
	ErrUpstreamTimeout = &Error{Code: CodeUpstreamTimeout}
	ErrInternal        = &Error{Code: CodeInternal}
)

// AsError turns any error into an *Error; a deadline becomes
// upstream_timeout, any other error without a code becomes internal with a generic message (its text is kept as the cause only).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeUpstreamTimeout, Message: "the request timed out", Cause: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Cause: err}
}

// ErrorReply is the JSON body of a failed request.
type ErrorReply struct {
	Error *Error `json:"error"`
}
