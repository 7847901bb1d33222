package api

import (
	"context"
	"html/template"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Connect your account (the tokens service runs the flows):
//
//	GET    /api/mcp/connections                     the caller's connections
//	POST   /api/mcp/connections/{server}/authorize  a link to connect
//	DELETE /api/mcp/connections/{server}            revoke and forget
//	GET    /oauth/callback                          where the browser comes back (no API key)
//	GET    /oauth/client-metadata.json              mcpbus's client ID metadata document
//
// {server} is a deployment server's name or the runtime name of one of
// the caller's personal connections.

func (s *Service) connectRoutes(e *echo.Echo, g *echo.Group) {
	g.GET("/mcp/connections", s.listConnections)
	g.POST("/mcp/connections/:server/authorize", s.authorizeConnection)
	g.DELETE("/mcp/connections/:server", s.deleteConnection)
	e.GET("/oauth/callback", s.oauthCallback)
	e.GET("/oauth/client-metadata.json", s.clientMetadata)
}

// connectionRequest names the connection {server} of the caller.
func (s *Service) connectionRequest(c echo.Context) (bus.OAuthConnectionRequest, error) {
	caller := callerOf(c)
	req := bus.OAuthConnectionRequest{Server: c.Param("server"), UserID: caller.UserID, Admin: caller.Role == RoleAdmin}
	if req.Server == "" {
		return req, bus.Errorf(bus.CodeInvalidRequest, "server is required")
	}
	if s.deps.Store != nil {
		rows, err := s.deps.Store.Connections().ListConnections(c.Request().Context(), store.ListConnectionsParams{UserID: caller.UserID})
		if err != nil {
			return req, storeError(err, "personal connections")
		}
		for _, pc := range rows {
			if pc.RuntimeName == req.Server {
				req.Owner = caller.UserID
			}
		}
	}
	return req, nil
}

func (s *Service) listConnections(c echo.Context) error {
	caller := callerOf(c)
	reply, err := bus.Request[bus.OAuthConnectionsReply](c.Request().Context(), s.deps.NC, s.deps.Names.InternalOAuthConnections(),
		bus.OAuthConnectionsRequest{UserID: caller.UserID, Admin: caller.Role == RoleAdmin})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}

func (s *Service) authorizeConnection(c echo.Context) error {
	req, err := s.connectionRequest(c)
	if err != nil {
		return err
	}
	reply, err := bus.Request[bus.OAuthAuthorizeReply](c.Request().Context(), s.deps.NC, s.deps.Names.InternalOAuthAuthorize(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}

func (s *Service) deleteConnection(c echo.Context) error {
	req, err := s.connectionRequest(c)
	if err != nil {
		return err
	}
	reply, err := bus.Request[bus.OAuthConnection](c.Request().Context(), s.deps.NC, s.deps.Names.InternalOAuthDisconnect(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}

// disconnectPersonal revokes and forgets the connected account of a
// personal connection being deleted or replaced (best effort: a
// connection that never connected an account has nothing to revoke).
func (s *Service) disconnectPersonal(ctx context.Context, runtimeName, user string) {
	_, _ = bus.Request[bus.OAuthConnection](ctx, s.deps.NC, s.deps.Names.InternalOAuthDisconnect(),
		bus.OAuthConnectionRequest{Server: runtimeName, Owner: user, UserID: user})
}

// resultPage is the callback's answer: what worked or failed and where to
// go back; no script, nothing loaded from elsewhere.
var resultPage = template.Must(template.New("result").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} - mcpbus</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><h1>{{.Title}}</h1><p>{{.Message}}</p>
<p>You can close this tab and go back to your agent or the mcpbus console{{if .Console}} (<a href="{{.Console}}">open the console</a>){{end}}.</p></main></body></html>
`))

type resultView struct{ Title, Message, Console string }

// oauthCallback finishes a flow. It takes no API key: the state (sealed,
// single use, bound to the user who started the flow) is the credential.
func (s *Service) oauthCallback(c echo.Context) error {
	q := c.QueryParams()
	req := bus.OAuthCallbackRequest{State: q.Get("state"), Code: q.Get("code"), Iss: q.Get("iss"),
		Error: q.Get("error"), ErrorDescription: q.Get("error_description")}
	view := resultView{Title: "Account connected"}
	if s.cfg.PublicURL != "" {
		view.Console = s.cfg.PublicURL + "/ui/connections"
	}
	status := http.StatusOK
	reply, err := bus.Request[bus.OAuthCallbackReply](c.Request().Context(), s.deps.NC, s.deps.Names.InternalOAuthCallback(), req)
	if err != nil {
		be := bus.AsError(err)
		status = be.Code.HTTPStatus()
		if be.Code == bus.CodeInvalidRequest || be.Code == bus.CodeOAuthFailed {
			status = http.StatusBadRequest
		}
		view.Title, view.Message = "Connecting your account failed", be.Message
	} else {
		view.Message = "mcpbus can now use MCP server '" + reply.Server + "' with your account."
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'none'; script-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	var b strings.Builder
	if err := resultPage.Execute(&b, view); err != nil {
		return err
	}
	return c.HTML(status, b.String())
}

// clientMetadata serves the client ID metadata document: its URL is the
// client_id mcpbus uses with authorization servers that support them
// (api.oauth_client_id_url names another URL where the operator hosts a
// copy of it).
func (s *Service) clientMetadata(c echo.Context) error {
	if s.cfg.PublicURL == "" {
		return bus.Errorf(bus.CodeNotFound, "api.public_url is not set")
	}
	clientID := s.cfg.ClientIDURL
	if clientID == "" {
		clientID = s.cfg.PublicURL + "/oauth/client-metadata.json"
	}
	return c.JSON(http.StatusOK, map[string]any{
		"client_id":                  clientID,
		"client_name":                "mcpbus",
		"client_uri":                 s.cfg.PublicURL,
		"redirect_uris":              []string{s.cfg.PublicURL + "/oauth/callback"},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}
