package tokens

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpauth"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// isConnectedAccount reports whether a row key is a connected account's.
func isConnectedAccount(key string) bool { return strings.HasPrefix(key, "authz:") }

// connectServer finds the server of a connection request: a deployment
// server, or the owner's personal connection; it must connect accounts.
func (s *Service) connectServer(ctx context.Context, req bus.OAuthConnectionRequest) (*config.Server, error) {
	if req.Server == "" || req.UserID == "" {
		return nil, bus.Errorf(bus.CodeInvalidRequest, "server and user_id are required")
	}
	tr := bus.TokenRequest{Server: req.Server, Owner: req.Owner}
	var srv *config.Server
	var err error
	if req.Owner != "" {
		if req.Owner != req.UserID {
			return nil, bus.Errorf(bus.CodeNotFound, "MCP server '%s' is not one of your personal connections", req.Server)
		}
		srv, err = s.personalServer(ctx, tr)
	} else {
		srv, err = s.server(ctx, tr)
	}
	if err != nil {
		return nil, err
	}
	if !srv.ConnectsAccounts() {
		return nil, bus.Errorf(bus.CodeInvalidRequest, "MCP server '%s' does not connect accounts (its oauth.grant_type is not authorization_code)", srv.Name)
	}
	if req.Owner == "" && srv.OAuth.Connect == config.ConnectShared && !req.Admin {
		return nil, bus.Errorf(bus.CodeForbidden, "MCP server '%s' is connected once for everyone; only an admin connects or disconnects it", srv.Name)
	}
	return srv, nil
}

// handleAuthorize serves bus.Names.InternalOAuthAuthorize: a new flow,
// or with StepUpScope a step-up (stepUp).
func (s *Service) handleAuthorize(ctx context.Context, req bus.OAuthAuthorizeRequest) (bus.OAuthAuthorizeReply, error) {
	check := req
	if req.StepUp {
		// Anyone's call may need a wider scope; for a shared connection
		// stepUp only records it for the admin's next authorization.
		check.Admin = true
	}
	srv, err := s.connectServer(ctx, check)
	if err != nil {
		return bus.OAuthAuthorizeReply{}, err
	}
	if req.StepUp {
		return s.stepUp(ctx, srv, req)
	}
	var fsc flowScope
	if rec, err := s.loadRecord(ctx, connKey(srv.Name, req.Owner, connUser(srv, req.Owner, req.UserID))); err == nil && rec != nil && rec.WantScope != "" {
		// A step-up of a shared connection is waiting for this admin.
		fsc = flowScope{wider: mcpauth.UniteScopes(rec.Scope, rec.WantScope), stepUps: rec.StepUps + 1}
	}
	u, exp, err := s.startFlow(ctx, srv, req.Owner, req.UserID, req.UserID, fsc)
	if err != nil {
		return bus.OAuthAuthorizeReply{}, err
	}
	return bus.OAuthAuthorizeReply{Server: srv.Name, AuthorizeURL: u, ExpiresAt: exp}, nil
}

// stepUp answers an upstream's 403 insufficient_scope on a connection: a
// flow asking for the challenged scope united with the scope the
// connection has (the caller's link), or for a shared connection that
// wider scope recorded for an admin to authorize; refused once the
// connection had maxStepUps. Each is audited (oauth_step_up: requested,
// refused at the limit; ok when the flow completes).
func (s *Service) stepUp(ctx context.Context, srv *config.Server, req bus.OAuthAuthorizeRequest) (bus.OAuthAuthorizeReply, error) {
	if err := s.connectReady(srv); err != nil {
		return bus.OAuthAuthorizeReply{}, err
	}
	ck := connKey(srv.Name, req.Owner, connUser(srv, req.Owner, req.UserID))
	rec, err := s.loadRecord(ctx, ck)
	if err != nil {
		return bus.OAuthAuthorizeReply{}, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot read the connection; retry", srv.Name))
	}
	challenged := mcpauth.UniteScopes(req.StepUpScope)
	granted, steps := "", 0
	if rec != nil {
		granted, steps = rec.Scope, rec.StepUps
	}
	if steps >= maxStepUps {
		s.audit(ctx, req.UserID, srv.Name, actionStepUp, "limit")
		return bus.OAuthAuthorizeReply{}, bus.Errorf(bus.CodeForbidden, "MCP server '%s' still answers 403 insufficient_scope (asking for scope '%s') after %d wider authorizations of this connection; mcpbus asks for no more. Ask the server's administrator for that access, or disconnect and connect again.", srv.Name, challenged, steps)
	}
	wider := mcpauth.UniteScopes(granted, challenged)
	s.audit(ctx, req.UserID, srv.Name, actionStepUp, "requested")
	if req.Owner == "" && srv.OAuth.Connect == config.ConnectShared && !req.Admin {
		if rec != nil {
			rec.WantScope = wider
			if err := s.putSealed(ctx, s.oauthKV, ck, rec); err != nil {
				return bus.OAuthAuthorizeReply{}, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot record the wider scope; retry", srv.Name))
			}
		}
		return bus.OAuthAuthorizeReply{}, bus.Errorf(bus.CodeAuthRequired, "MCP server '%s' needs a wider scope ('%s') than its shared connection was granted: an admin connects it again (POST /api/mcp/connections/%s/authorize), which asks for it.", srv.Name, wider, srv.Name)
	}
	u, exp, err := s.startFlow(ctx, srv, req.Owner, req.UserID, req.UserID, flowScope{wider: wider, stepUps: steps + 1})
	if err != nil {
		return bus.OAuthAuthorizeReply{}, err
	}
	return bus.OAuthAuthorizeReply{Server: srv.Name, AuthorizeURL: u, ExpiresAt: exp}, nil
}

// handleCallback serves bus.Names.InternalOAuthCallback.
func (s *Service) handleCallback(ctx context.Context, req bus.OAuthCallbackRequest) (bus.OAuthCallbackReply, error) {
	return s.finishFlow(ctx, req)
}

// handleDisconnect serves bus.Names.InternalOAuthDisconnect.
func (s *Service) handleDisconnect(ctx context.Context, req bus.OAuthConnectionRequest) (bus.OAuthConnection, error) {
	srv, err := s.connectServer(ctx, req)
	if err != nil {
		return bus.OAuthConnection{}, err
	}
	if err := s.disconnect(ctx, srv, req.Owner, req.UserID, req.UserID); err != nil {
		return bus.OAuthConnection{}, err
	}
	return bus.OAuthConnection{Server: srv.Name, Mode: modeOf(srv, req.Owner), State: bus.ConnectionNeedsAuth}, nil
}

// pendingLink is the link of the user's flow in progress for the
// connection, or of a new one: listing connections again does not start a
// flow (a state, a registration lookup, discovery) per server each time.
// A link is reused while its state is unused and has a minute left.
func (s *Service) pendingLink(ctx context.Context, srv *config.Server, owner, user string) (string, error) {
	key := "p." + hashHex(srv.Name, owner, user)
	var p struct {
		URL     string    `json:"url"`
		State   string    `json:"state"`
		Expires time.Time `json:"expires"`
	}
	if ok, err := s.getSealed(ctx, s.statesKV, key, &p); err == nil && ok && s.deps.Clock().Add(time.Minute).Before(p.Expires) {
		if _, err := s.statesKV.Get(ctx, p.State); err == nil {
			return p.URL, nil
		}
	}
	u, exp, err := s.startFlow(ctx, srv, owner, user, user, flowScope{})
	if err != nil {
		return "", err
	}
	if pu, perr := url.Parse(u); perr == nil {
		p.URL, p.State, p.Expires = u, stateKey(pu.Query().Get("state")), exp
		_ = s.putSealed(ctx, s.statesKV, key, p) // without it the next listing starts another flow
	}
	return u, nil
}

func modeOf(srv *config.Server, owner string) string {
	if owner != "" {
		return "personal"
	}
	return srv.OAuth.Connect
}

// handleConnections serves bus.Names.InternalOAuthConnections: every
// deployment server and personal connection of the user that connects
// accounts, with its state and, when not connected, a link.
func (s *Service) handleConnections(ctx context.Context, req bus.OAuthConnectionsRequest) (bus.OAuthConnectionsReply, error) {
	if req.UserID == "" {
		return bus.OAuthConnectionsReply{}, bus.Errorf(bus.CodeInvalidRequest, "user_id is required")
	}
	type entry struct {
		srv   *config.Server
		owner string
	}
	var list []entry
	if ext := s.watcher.Current().Extensions; ext != nil {
		for _, srv := range ext.Enabled() {
			if srv.ConnectsAccounts() {
				list = append(list, entry{srv, ""})
			}
		}
	}
	if pr, err := bus.Request[bus.PersonalServersReply](ctx, s.deps.NC, s.deps.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: req.UserID}); err == nil {
		for _, p := range pr.Servers {
			srv, err := s.personalServer(ctx, bus.TokenRequest{Server: p.RuntimeName, Owner: req.UserID})
			if err == nil && srv.ConnectsAccounts() {
				list = append(list, entry{srv, req.UserID})
			}
		}
	}
	out := bus.OAuthConnectionsReply{Connections: []bus.OAuthConnection{}}
	for _, e := range list {
		c := bus.OAuthConnection{Server: e.srv.Name, Mode: modeOf(e.srv, e.owner), State: bus.ConnectionNeedsAuth}
		if err := s.connectReady(e.srv); err != nil {
			c.State, c.Error = bus.ConnectionError, bus.UserMessage(err)
			out.Connections = append(out.Connections, c)
			continue
		}
		user := connUser(e.srv, e.owner, req.UserID)
		rec, err := s.loadRecord(ctx, connKey(e.srv.Name, e.owner, user))
		if err != nil {
			c.State, c.Error = bus.ConnectionError, "cannot read the connection"
		} else if rec != nil {
			c.Issuer, c.Scopes = rec.Issuer, rec.Scope
			if rec.State == bus.ConnectionConnected {
				c.State = bus.ConnectionConnected
				at := rec.ConnectedAt
				c.ConnectedAt = &at
				if row, err := s.deps.Tokens.GetToken(ctx, store.GetTokenParams{Key: rec.RowKey}); err == nil && row.ExpiresAt != nil {
					exp := row.ExpiresAt.UTC()
					c.ExpiresAt = &exp
				}
			}
		}
		if c.State == bus.ConnectionNeedsAuth && (e.owner != "" || e.srv.OAuth.Connect != config.ConnectShared || req.Admin) {
			u, err := s.pendingLink(ctx, e.srv, e.owner, req.UserID)
			if err != nil {
				c.State, c.Error = bus.ConnectionError, bus.UserMessage(err)
			} else {
				c.AuthorizeURL = u
			}
		}
		out.Connections = append(out.Connections, c)
	}
	sort.Slice(out.Connections, func(i, j int) bool { return out.Connections[i].Server < out.Connections[j].Server })
	return out, nil
}

// handleAccountStates serves bus.Names.InternalOAuthAccountStates: the
// per-user deployment servers on which the user's account is not
// connected, with their state, for discovery to show on their tools. It
// starts no flow.
func (s *Service) handleAccountStates(ctx context.Context, req bus.OAuthAccountStatesRequest) (bus.OAuthAccountStatesReply, error) {
	if req.UserID == "" {
		return bus.OAuthAccountStatesReply{}, bus.Errorf(bus.CodeInvalidRequest, "user_id is required")
	}
	out := bus.OAuthAccountStatesReply{UserID: req.UserID, States: map[string]string{}}
	ext := s.watcher.Current().Extensions
	if ext == nil || s.oauthKV == nil {
		return out, nil
	}
	for _, srv := range ext.Enabled() {
		if !srv.ConnectsAccounts() || srv.OAuth.Connect == config.ConnectShared {
			continue
		}
		rec, err := s.loadRecord(ctx, connKey(srv.Name, "", req.UserID))
		switch {
		case err != nil:
			return bus.OAuthAccountStatesReply{}, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot read your connection; retry", srv.Name))
		case rec == nil:
			out.States[srv.Name] = bus.ConnectionNeedsAuth
		case rec.State != bus.ConnectionConnected:
			out.States[srv.Name] = rec.State
		}
	}
	return out, nil
}
