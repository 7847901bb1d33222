package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// statusError overrides the HTTP status a code maps to (422 for refused
// metadata credentials).
type statusError struct {
	status int
	err    *bus.Error
}

func (e *statusError) Error() string { return e.err.Error() }

// errorHandler writes every failure as {"error": {code, message}} with the
// status of the code; the one place codes become statuses.
func (s *Service) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := http.StatusInternalServerError
	logged := err // what LogFailure classifies
	var body *bus.Error
	var se *statusError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &se):
		status, body, logged = se.status, se.err, se.err
	case errors.As(err, &he):
		status = he.Code
		body = &bus.Error{Code: codeForStatus(he.Code), Message: http.StatusText(he.Code)}
		if msg, ok := he.Message.(string); ok && msg != "" {
			body.Message = msg
		}
		logged = body
		if body.Code == bus.CodeInternal {
			logged = bus.Wrap(body.Code, err, body.Message)
		}
	default:
		body = bus.AsError(err)
		status = body.Code.HTTPStatus()
	}
	bus.LogFailure(c.Request().Context(), s.log, logged, "path", c.Path())
	switch ra, ok := body.Details["retry_after_seconds"]; {
	case ok:
		// A refusal that says when to retry (a cache reset while the KV
		// bucket has no leader) says it in the standard header too.
		c.Response().Header().Set("Retry-After", fmt.Sprint(ra))
	case body.Code == bus.CodeRateLimited:
		// A cap on calls in flight frees as soon as a call ends.
		c.Response().Header().Set("Retry-After", "1")
	}
	_ = c.JSON(status, bus.ErrorReply{Error: &bus.Error{Code: body.Code, Message: body.Message, Details: body.Details}})
}

func codeForStatus(status int) bus.Code {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed,
		http.StatusUnsupportedMediaType, http.StatusRequestTimeout, http.StatusConflict:
		return bus.CodeInvalidRequest
	case http.StatusUnauthorized:
		return bus.CodeUnauthorized
	case http.StatusForbidden:
		return bus.CodeForbidden
	case http.StatusNotFound:
		return bus.CodeNotFound
	case http.StatusServiceUnavailable:
		return bus.CodeUnavailable
	default:
		return bus.CodeInternal
	}
}
