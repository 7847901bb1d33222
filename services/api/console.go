package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/services/api/internal/console"
)

// consoleRoutes serves the web console at /ui/ (package console). The
// console reads and changes everything through the REST routes, signed in
// by the session cookie of session.go.
func (s *Service) consoleRoutes(e *echo.Echo) {
	ui := echo.WrapHandler(console.Handler())
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, console.Prefix) })
	e.GET("/ui/*", ui)
}
