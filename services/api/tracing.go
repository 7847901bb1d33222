package api

import (
	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// trace is the outermost middleware: one server span per request, named by
// the route template, so the request's log line (observe) and every bus
// request it makes carry its trace id. Tracing off, it costs a branch.
func (s *Service) trace(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		route := c.Path()
		if route == "" || isCatchAll(route) {
			route = unmatchedRoute
		}
		ctx, span := tracing.StartHTTP(c.Request(), route)
		if tracing.Active() {
			c.SetRequest(c.Request().WithContext(ctx))
		}
		err := next(c)
		tracing.EndHTTP(span, c.Response().Status)
		return err
	}
}
