package tokens

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// HeaderName is the header the tokens service fills.
const HeaderName = "Authorization"

// handleToken serves bus.Names.InternalToken.
func (s *Service) handleToken(ctx context.Context, req bus.TokenRequest) (_ bus.TokenReply, err error) {
	if req.Server == "" {
		return bus.TokenReply{}, bus.Errorf(bus.CodeInvalidRequest, "server is required")
	}
	var srv *config.Server
	defer func() { s.countFetch(srv, req.Owner, err) }()
	if req.Owner != "" {
		srv, err = s.personalServer(ctx, req)
	} else {
		srv, err = s.server(ctx, req)
	}
	if err != nil {
		return bus.TokenReply{}, err
	}
	if srv.ConnectsAccounts() {
		tok, skew, err := s.connectedToken(ctx, srv, req)
		if err != nil {
			return bus.TokenReply{}, err
		}
		return bus.TokenReply{Header: HeaderName, Value: tok.value(), ExpiresAt: tok.expiresAt, RefreshSkewSeconds: max(skew, 0)}, nil
	}
	tok, err := s.token(ctx, srv, req.Owner, req.ForceRefresh, req.RejectedValueSHA256)
	if err != nil {
		return bus.TokenReply{}, err
	}
	return bus.TokenReply{
		Header: HeaderName, Value: tok.value(), ExpiresAt: tok.expiresAt,
		RefreshSkewSeconds: max(srv.OAuth.RefreshSkewSeconds, 0),
	}, nil
}

// server finds the request's server in the shared config, waiting up to
// Config.ConfigWait for the config to catch up with the caller's view.
func (s *Service) server(ctx context.Context, req bus.TokenRequest) (*config.Server, error) {
	deadline := time.Now().Add(s.cfg.ConfigWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		srv := s.watcher.Current().Extensions.Server(req.Server)
		switch {
		case srv == nil || !srv.Enabled:
			if req.ConfigFingerprint == "" || time.Now().After(deadline) {
				return nil, bus.Errorf(bus.CodeNotFound, "MCP server '%s' is not configured or disabled", req.Server)
			}
		case req.ConfigFingerprint != "" && req.ConfigFingerprint != srv.Fingerprint:
			if time.Now().After(deadline) {
				return nil, bus.Errorf(bus.CodeConfigError, "MCP server '%s': the tokens service has another configuration of this server than the caller; retry once the configuration has reached every service", req.Server)
			}
		case !srv.OAuthEnabled():
			return nil, bus.Errorf(bus.CodeInvalidRequest, "MCP server '%s' has no enabled oauth block", req.Server)
		default:
			return srv, nil
		}
		select {
		case <-ctx.Done():
			return nil, bus.Errorf(bus.CodeUpstreamTimeout, "MCP server '%s': timed out waiting for its configuration", req.Server)
		case <-tick.C:
		}
	}
}

// personalServer finds a personal connection by runtime name among the
// owner's connections (asked of the api service on
// bus.Names.InternalPersonal). Its row is keyed by the runtime name with
// owner_user_id = owner; the api deletes it when the connection is edited or
// deleted.
func (s *Service) personalServer(ctx context.Context, req bus.TokenRequest) (*config.Server, error) {
	reply, err := bus.Request[bus.PersonalServersReply](ctx, s.deps.NC, s.deps.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: req.Owner})
	if err != nil {
		return nil, err
	}
	var found *bus.PersonalServer
	for i := range reply.Servers {
		if reply.Servers[i].RuntimeName == req.Server {
			found = &reply.Servers[i]
		}
	}
	if found == nil {
		return nil, bus.Errorf(bus.CodeNotFound, "MCP server '%s' is not one of your personal connections", req.Server)
	}
	doc, err := json.Marshal(map[string]any{"mcpServers": map[string]json.RawMessage{found.RuntimeName: found.Definition}})
	if err != nil {
		return nil, bus.Wrap(bus.CodeInternal, err, "cannot read the personal connection")
	}
	ext, err := config.ParseExtensions("", doc)
	if err != nil {
		return nil, bus.Errorf(bus.CodeConfigError, "MCP server '%s': the personal connection does not parse", req.Server)
	}
	srv := ext.Server(found.RuntimeName)
	switch {
	case srv == nil || !srv.Enabled:
		return nil, bus.Errorf(bus.CodeNotFound, "MCP server '%s' is not configured or disabled", req.Server)
	case req.ConfigFingerprint != "" && req.ConfigFingerprint != srv.Fingerprint:
		return nil, bus.Errorf(bus.CodeConfigError, "MCP server '%s': the personal connection changed; retry with its current definition", req.Server)
	case !srv.OAuthEnabled():
		return nil, bus.Errorf(bus.CodeInvalidRequest, "MCP server '%s' has no enabled oauth block", req.Server)
	}
	return srv, nil
}

// configChanged deletes the stored chains of deployment servers the new
// config no longer has (a disabled server keeps its row) and forgets their
// in-memory tokens.
func (s *Service) configChanged(prev, next sharedstate.Snapshot) {
	if prev.Extensions == nil || next.Extensions == nil || prev.Extensions == next.Extensions {
		return
	}
	present := rawServerNames(next.Extensions)
	for _, srv := range prev.Extensions.Servers {
		if present[srv.Name] || next.Extensions.Server(srv.Name) != nil {
			continue
		}
		key := srv.Name
		s.mu.Lock()
		delete(s.conns, memKey(key, ""))
		s.mu.Unlock()
		if srv.ConnectsAccounts() {
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				s.removeConnections(srv)
			}()
			continue
		}
		if srv.OAuth == nil || srv.OAuth.GrantType != config.GrantRefreshToken || s.deps.Tokens == nil {
			continue
		}
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
			defer cancel()
			if err := s.deps.Tokens.DeleteToken(ctx, store.DeleteTokenParams{Key: key}); err != nil {
				s.log.Warn("cannot delete the token row of a removed server", observability.Server(srv.Name), observability.Err(err))
				return
			}
			s.log.Info("deleted the token row of a removed server", observability.Server(srv.Name))
		}()
	}
}

// rawServerNames lists every key of mcpServers as written, including entries
// that failed to parse (their chains are kept).
func rawServerNames(ext *config.Extensions) map[string]bool {
	out := map[string]bool{}
	var m map[string]json.RawMessage
	if raw, ok := ext.Raw["mcpServers"]; ok && json.Unmarshal(raw, &m) == nil {
		for k := range m {
			out[k] = true
		}
	}
	return out
}
