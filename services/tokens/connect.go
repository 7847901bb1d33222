package tokens

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpauth"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Connect your account: servers with oauth.grant_type authorization_code.
//
// A connection is (server, owner, user): owner is the user of a personal
// connection (server is then its runtime name), user is "" for a shared
// deployment server and the person otherwise. Its record (issuer,
// endpoints, client, resource, scope, state) is sealed in the OAuth
// bucket under connKey; its tokens are an mcp_oauth_tokens row keyed by
// rowKey (user + server + issuer), refreshed through the same chain as
// every refresh_token server (one refresh at a time across replicas, with
// rotation). A flow in progress is a sealed entry of the states bucket
// under the SHA-256 of its state, deleted with a compare-and-set when the
// callback uses it (single use across replicas).

// Audit actions of connection changes (kind config, the server named).
const (
	actionConnect    = "oauth_connect"
	actionRefresh    = "oauth_refresh"
	actionNeedsAuth  = "oauth_needs_auth"
	actionDisconnect = "oauth_disconnect"
	actionStepUp     = "oauth_step_up"
)

// maxStepUps bounds the step-ups of one connection (authorizations for a
// wider scope after a 403 insufficient_scope): with the first
// authorization at most three, so a server that keeps answering 403
// cannot send its users round in circles. Connecting again resets it.
const maxStepUps = 2

// connRecord is a connection's sealed record.
type connRecord struct {
	Server             string         `json:"server"`
	Owner              string         `json:"owner,omitempty"`
	UserID             string         `json:"user_id,omitempty"`
	Issuer             string         `json:"issuer"`
	TokenEndpoint      string         `json:"token_endpoint"`
	RevocationEndpoint string         `json:"revocation_endpoint,omitempty"`
	Resource           string         `json:"resource"`
	Scope              string         `json:"scope,omitempty"`
	Client             mcpauth.Client `json:"client"`
	State              string         `json:"state"`
	RowKey             string         `json:"row_key"`
	ConnectedAt        time.Time      `json:"connected_at"`
	// StepUps counts the step-ups since the connection was made.
	StepUps int `json:"step_ups,omitempty"`
	// WantScope is the wider scope a step-up of a shared connection
	// asked for: the admin's next authorization asks for it.
	WantScope string `json:"want_scope,omitempty"`
}

// flowState is a flow in progress (sealed in the states bucket).
type flowState struct {
	Server             string         `json:"server"`
	Owner              string         `json:"owner,omitempty"`
	UserID             string         `json:"user_id,omitempty"`
	Starter            string         `json:"starter"` // the user who started it
	Verifier           string         `json:"verifier"`
	Issuer             string         `json:"issuer"`
	IssRequired        bool           `json:"iss_required,omitempty"`
	TokenEndpoint      string         `json:"token_endpoint"`
	RevocationEndpoint string         `json:"revocation_endpoint,omitempty"`
	Resource           string         `json:"resource"`
	Scope              string         `json:"scope,omitempty"`
	RedirectURI        string         `json:"redirect_uri"`
	Client             mcpauth.Client `json:"client"`
	Expires            time.Time      `json:"expires"`
	// StepUps is the connection's step-up count once this flow
	// completes (0: a new connection).
	StepUps int `json:"step_ups,omitempty"`
}

func hashHex(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

func connKey(server, owner, user string) string { return "conn." + hashHex(server, owner, user) }
func rowKeyOf(server, owner, user, issuer string) string {
	return "authz:" + hashHex(server, owner, user, issuer)[:40]
}
func clientKey(issuer, redirect string) string { return "client." + hashHex(issuer, redirect) }
func stateKey(state string) string             { return "s." + hashHex(state) }

// connUser is the user a connection of srv belongs to for caller user: ""
// for a shared deployment server.
func connUser(srv *config.Server, owner, user string) string {
	switch {
	case owner != "":
		return owner // a personal connection is its owner's
	case srv.OAuth.Connect == config.ConnectShared:
		return ""
	}
	return user
}

// catalogKey points at the connection whose token discovery uses to list
// a per-user server's tools (the latest one connected): the tool list is
// the server's, whoever asks; calls always carry the caller's own token.
func catalogKey(server, owner string) string { return "catalog." + hashHex(server, owner) }

// connectReady checks what connecting needs.
func (s *Service) connectReady(srv *config.Server) error {
	switch {
	case s.oauthKV == nil || s.statesKV == nil:
		return bus.Errorf(bus.CodeUnavailable, "MCP server '%s': connecting accounts is not available yet (the tokens service is starting)", srv.Name)
	case s.deps.Sealer == nil:
		return bus.Errorf(bus.CodeConfigError, "MCP server '%s': connecting accounts needs the credentials key (%s) so tokens and client registrations are stored encrypted", srv.Name, config.EnvCredentialsKey)
	case s.cfg.PublicURL == "":
		return bus.Errorf(bus.CodeConfigError, "MCP server '%s': connecting accounts needs api.public_url (the redirect URI is <api.public_url>/oauth/callback)", srv.Name)
	case srv.Type == config.TransportStdio:
		return bus.Errorf(bus.CodeConfigError, "MCP server '%s': a stdio server has no OAuth authorization", srv.Name)
	}
	return nil
}

func (s *Service) redirectURI() string { return s.cfg.PublicURL + "/oauth/callback" }

// ClientMetadataPath is where the api serves the client ID metadata
// document (under api.public_url).
const ClientMetadataPath = "/oauth/client-metadata.json"

// httpFor is the client for a connection's authorization server: through
// the egress policy for personal connections.
func (s *Service) httpFor(owner string) *http.Client {
	if owner != "" {
		return s.personalHTTP
	}
	return s.http
}

// loadRecord returns the connection's record, nil when there is none.
func (s *Service) loadRecord(ctx context.Context, key string) (*connRecord, error) {
	var rec connRecord
	ok, err := s.getSealed(ctx, s.oauthKV, key, &rec)
	if err != nil || !ok {
		return nil, err
	}
	return &rec, nil
}

func (s *Service) getSealed(ctx context.Context, kv jetstream.KeyValue, key string, v any) (bool, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	plain, err := s.deps.Sealer.Open(e.Value(), []byte(kv.Bucket()+"/"+key))
	if err != nil {
		return false, fmt.Errorf("the sealed entry %s does not open with this credentials key", key)
	}
	return true, json.Unmarshal(plain, v)
}

func (s *Service) putSealed(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	plain, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sealed, err := s.deps.Sealer.Seal(plain, []byte(kv.Bucket()+"/"+key))
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, key, sealed)
	return err
}

// flowScope is what a new flow asks for beyond the server's own scope:
// wider (united with it) and the step-up count the connection will have.
type flowScope struct {
	wider   string
	stepUps int
}

// startFlow discovers the server's authorization server, identifies
// mcpbus to it and returns the authorization URL of a new flow.
func (s *Service) startFlow(ctx context.Context, srv *config.Server, owner, user, starter string, fsc flowScope) (string, time.Time, error) {
	if err := s.connectReady(srv); err != nil {
		return "", time.Time{}, err
	}
	fail := func(step string, err error) error {
		msg := fmt.Sprintf("MCP server '%s': cannot start connecting your account: %s: %s", srv.Name, step, srv.Redactor().String(err.Error()))
		s.log.WarnContext(ctx, "cannot start an OAuth authorization", observability.Server(srv.Name), "step", step, observability.Err(errors.New(msg)))
		return &bus.Error{Code: bus.CodeOAuthFailed, Message: msg, Cause: errors.New(msg)}
	}
	hc := s.httpFor(owner)
	if owner != "" {
		if err := s.egress.CheckURL(srv.URL); err != nil {
			return "", time.Time{}, fail("the server URL", err)
		}
	}
	d := &mcpauth.Discoverer{HTTP: hc}
	ch, err := d.Challenge(ctx, srv.URL)
	if err != nil {
		return "", time.Time{}, fail("discovery", err)
	}
	rm, err := d.Resource(ctx, srv.URL, ch)
	if err != nil {
		return "", time.Time{}, fail("discovery", err)
	}
	issuer := rm.AuthorizationServers[0]
	if owner != "" {
		if err := s.egress.CheckURL(issuer); err != nil {
			return "", time.Time{}, fail("the authorization server", err)
		}
	}
	md, err := d.AuthServer(ctx, issuer)
	if err != nil {
		return "", time.Time{}, fail("discovery", err)
	}
	scope := srv.OAuth.Scope
	if scope == "" {
		scope = mcpauth.SelectScope(ch, rm)
	}
	scope = mcpauth.UniteScopes(scope, fsc.wider)
	client, err := s.clientFor(ctx, srv, md, hc)
	if err != nil {
		return "", time.Time{}, fail("client registration", err)
	}
	state, verifier := mcpauth.RandomToken(), mcpauth.NewVerifier()
	expires := s.deps.Clock().Add(s.cfg.FlowTTL).UTC()
	fs := flowState{
		Server: srv.Name, Owner: owner, UserID: connUser(srv, owner, user), Starter: starter, Verifier: verifier,
		Issuer: md.Issuer, IssRequired: md.IssParameterSupported, TokenEndpoint: md.TokenEndpoint,
		RevocationEndpoint: md.RevocationEndpoint, Resource: rm.Resource, Scope: scope,
		RedirectURI: s.redirectURI(), Client: *client, Expires: expires, StepUps: fsc.stepUps,
	}
	if err := s.putSealed(ctx, s.statesKV, stateKey(state), fs); err != nil {
		return "", time.Time{}, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot record the authorization flow; retry", srv.Name))
	}
	u, err := mcpauth.AuthorizeURL(md, mcpauth.AuthRequest{Client: *client, RedirectURI: fs.RedirectURI, State: state, Verifier: verifier, Scope: scope, Resource: rm.Resource})
	if err != nil {
		return "", time.Time{}, fail("authorization URL", err)
	}
	return u, expires, nil
}

// clientFor is mcpbus's client at md: the configured client_id, else the
// client ID metadata document when the server supports it, else a dynamic
// registration (stored sealed and reused per issuer and redirect URI).
func (s *Service) clientFor(ctx context.Context, srv *config.Server, md *mcpauth.ServerMetadata, hc *http.Client) (*mcpauth.Client, error) {
	if o := srv.OAuth; o.ClientID != "" {
		method := o.TokenEndpointAuthMethod
		if method == "" {
			method = mcpauth.ChooseAuthMethod(md, o.ClientSecret != "")
		}
		return &mcpauth.Client{ID: o.ClientID, Secret: o.ClientSecret, AuthMethod: method}, nil
	}
	if md.ClientIDMetadataDocumentSupported {
		id := s.cfg.ClientIDURL
		if id == "" {
			id = s.cfg.PublicURL + ClientMetadataPath
		}
		return &mcpauth.Client{ID: id, AuthMethod: mcpauth.AuthNone}, nil
	}
	key := clientKey(md.Issuer, s.redirectURI())
	var c mcpauth.Client
	if ok, err := s.getSealed(ctx, s.oauthKV, key, &c); err == nil && ok && c.ID != "" {
		return &c, nil
	}
	// No scope in the registration: it is reused by every server of the
	// issuer and by step-ups, which ask for more than the first flow.
	reg, err := mcpauth.Register(ctx, hc, md, "mcpbus", s.redirectURI(), "")
	if err != nil {
		return nil, err
	}
	if err := s.putSealed(ctx, s.oauthKV, key, reg); err != nil {
		return nil, fmt.Errorf("cannot store the client registration: %w", err)
	}
	s.log.InfoContext(ctx, "registered mcpbus with an authorization server", observability.Server(srv.Name), "issuer", md.Issuer)
	return reg, nil
}

// callbackError is a refused callback: the message names what failed,
// never the code or the state.
func callbackError(msg string) error { return bus.Errorf(bus.CodeInvalidRequest, "%s", msg) }

// finishFlow serves bus.Names.InternalOAuthCallback: it takes the state
// (once), checks the issuer, redeems the code and stores the tokens.
func (s *Service) finishFlow(ctx context.Context, req bus.OAuthCallbackRequest) (bus.OAuthCallbackReply, error) {
	if s.statesKV == nil || s.deps.Sealer == nil {
		return bus.OAuthCallbackReply{}, bus.Errorf(bus.CodeUnavailable, "connecting accounts is not available")
	}
	if req.State == "" {
		return bus.OAuthCallbackReply{}, callbackError("the authorization response has no state")
	}
	key := stateKey(req.State)
	e, err := s.statesKV.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return bus.OAuthCallbackReply{}, callbackError("this authorization response was not started by mcpbus, was already used or has expired; start connecting again")
	}
	if err != nil {
		return bus.OAuthCallbackReply{}, bus.Wrap(bus.CodeUnavailable, err, "cannot read the authorization flow; retry")
	}
	// Single use across replicas: only the delete at this revision wins.
	if err := s.statesKV.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
		return bus.OAuthCallbackReply{}, callbackError("this authorization response was already used; start connecting again")
	}
	var fs flowState
	plain, err := s.deps.Sealer.Open(e.Value(), []byte(s.statesKV.Bucket()+"/"+key))
	if err != nil || json.Unmarshal(plain, &fs) != nil {
		return bus.OAuthCallbackReply{}, callbackError("this authorization response was not started by mcpbus")
	}
	if !s.deps.Clock().Before(fs.Expires) {
		return bus.OAuthCallbackReply{}, callbackError("this authorization flow has expired; start connecting again")
	}
	reply := bus.OAuthCallbackReply{Server: fs.Server, UserID: fs.Starter}
	if req.Error != "" {
		code := req.Error
		if len(code) > 64 || strings.ContainsAny(code, " <>\"'") {
			code = "an error"
		}
		return reply, bus.Errorf(bus.CodeOAuthFailed, "MCP server '%s': the authorization server answered %s instead of authorizing mcpbus", fs.Server, code)
	}
	md := &mcpauth.ServerMetadata{Issuer: fs.Issuer, TokenEndpoint: fs.TokenEndpoint, IssParameterSupported: fs.IssRequired}
	if err := mcpauth.CheckIssuer(md, req.Iss); err != nil {
		s.log.WarnContext(ctx, "refused an authorization response from the wrong issuer", observability.Server(fs.Server))
		return reply, bus.Errorf(bus.CodeOAuthFailed, "MCP server '%s': %s (a mix-up attack, or a misconfigured server); nothing was stored", fs.Server, err)
	}
	if req.Code == "" {
		return reply, callbackError("the authorization response has no code")
	}
	tok, err := mcpauth.Exchange(ctx, s.httpFor(fs.Owner), md, fs.Client, req.Code, fs.Verifier, fs.RedirectURI, fs.Resource)
	if err != nil {
		msg := fmt.Sprintf("MCP server '%s': the authorization server did not accept the authorization: %s", fs.Server, redactTokenErr(err))
		s.log.WarnContext(ctx, "OAuth code exchange failed", observability.Server(fs.Server), observability.Err(errors.New(msg)))
		return reply, &bus.Error{Code: bus.CodeOAuthFailed, Message: msg, Cause: errors.New(msg)}
	}
	rec := &connRecord{
		Server: fs.Server, Owner: fs.Owner, UserID: fs.UserID, Issuer: fs.Issuer, TokenEndpoint: fs.TokenEndpoint,
		RevocationEndpoint: fs.RevocationEndpoint, Resource: fs.Resource, Scope: firstNonEmpty(tok.Scope, fs.Scope), Client: fs.Client,
		State: bus.ConnectionConnected, RowKey: rowKeyOf(fs.Server, fs.Owner, fs.UserID, fs.Issuer), ConnectedAt: s.deps.Clock().UTC(),
	}
	rec.StepUps = fs.StepUps
	if err := s.storeGrant(ctx, rec, tok); err != nil {
		return reply, err
	}
	if fs.StepUps > 0 {
		s.audit(ctx, fs.Starter, fs.Server, actionStepUp, "ok")
	} else {
		s.audit(ctx, fs.Starter, fs.Server, actionConnect, "ok")
	}
	s.log.InfoContext(ctx, "connected an account", observability.Server(fs.Server), "shared", fs.UserID == "" && fs.Owner == "")
	return reply, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redactTokenErr is the text of a token endpoint failure: mcpauth's
// errors carry the status and the OAuth error code only.
func redactTokenErr(err error) string {
	var te *mcpauth.TokenError
	if errors.As(err, &te) {
		return te.Error()
	}
	return "the token endpoint could not be reached"
}

// storeGrant writes the tokens of a new authorization as the head of the
// connection's chain, then its record (a previous connection to another
// issuer loses its row).
func (s *Service) storeGrant(ctx context.Context, rec *connRecord, tok *mcpauth.Token) error {
	if s.deps.Tokens == nil {
		return bus.Errorf(bus.CodeConfigError, "MCP server '%s': connecting accounts needs a sqlite or postgres database", rec.Server)
	}
	ck := connKey(rec.Server, rec.Owner, rec.UserID)
	if old, err := s.loadRecord(ctx, ck); err == nil && old != nil && old.RowKey != rec.RowKey {
		_ = s.deps.Tokens.DeleteToken(ctx, store.DeleteTokenParams{Key: old.RowKey})
	}
	o := chainOAuth(rec, 0)
	at := &accessToken{access: tok.AccessToken, tokenType: tok.TokenType, fingerprint: chainFingerprint(o), shape: requestShape(o),
		expiresAt: s.deps.Clock().Add(time.Duration(max(tok.ExpiresIn, 1)) * time.Second).UTC()}
	if tok.ExpiresIn <= 0 {
		at.expiresAt = s.deps.Clock().Add(time.Hour).UTC()
	}
	row, err := s.sealRow(rec.RowKey, rowOwner(rec), at, tok.RefreshToken)
	if err != nil {
		return bus.Wrap(bus.CodeInternal, err, "cannot encrypt the new tokens")
	}
	if _, err := s.deps.Tokens.PutToken(ctx, store.PutTokenParams{Token: *row}); err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot store the tokens; connect again when the database is back", rec.Server))
	}
	s.forget(rec)
	if err := s.putSealed(ctx, s.oauthKV, ck, rec); err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot record the connection; connect again", rec.Server))
	}
	first := false
	if rec.UserID != "" || rec.Owner != "" {
		// Discovery lists a per-user server's tools with the latest
		// account connected.
		if _, err := s.oauthKV.Create(ctx, catalogKey(rec.Server, rec.Owner), []byte(ck)); err == nil {
			first = true
		} else {
			_, _ = s.oauthKV.Put(ctx, catalogKey(rec.Server, rec.Owner), []byte(ck))
		}
	}
	reset := false
	if first {
		// The first account of the server: a cache reset, answered once
		// the catalog is built again, so the listing that follows the
		// callback shows its tools (where this service may not reset
		// the cache, the rediscovery below does it a moment later).
		_, err := bus.Request[bus.CacheResetReply](ctx, s.deps.NC, s.deps.Names.CacheReset(), bus.CacheResetRequest{Reason: "account connected"})
		reset = err == nil
	}
	if !reset {
		s.rediscover(rec)
	}
	s.accountChanged(rec)
	return nil
}

// accountChanged tells discovery and toolcall that a user's account
// changed (connected, needs_auth, disconnected): the user's catalog shows
// the account's state on the server's tools (bus.Tool.Connection). It is
// the personal-connection change event of that user; a shared connection
// has no user and changes nobody's catalog.
func (s *Service) accountChanged(rec *connRecord) {
	user := rowOwner(rec)
	if user == "" {
		return
	}
	body, err := json.Marshal(bus.PersonalServersRequest{UserID: user})
	if err == nil {
		err = s.deps.NC.Publish(s.deps.Names.PersonalEvents(user), body)
	}
	if err != nil {
		s.log.Warn("cannot announce an account change; catalogs show it once their personal part is read again", observability.Server(rec.Server), observability.Err(err))
	}
}

// rediscover asks every discovery replica to discover rec's server again
// with the new connection (one connected again, e.g. after the server
// refused the old token, or a shared one), so its tools are listed now
// rather than after a failed server's retry delay.
func (s *Service) rediscover(rec *connRecord) {
	b, err := json.Marshal(bus.RediscoverRequest{Server: rec.Server, UserID: rec.Owner, Lists: []string{bus.ListTools, bus.ListPrompts, bus.ListResources}})
	if err == nil {
		err = s.deps.NC.Publish(s.deps.Names.InternalRediscover(), b)
	}
	if err != nil {
		s.log.Warn("cannot ask discovery to list a newly connected server's tools; they are listed at its next retry", observability.Server(rec.Server), observability.Err(err))
	}
}

// rowOwner is the owner_user_id of a connection's row: the person ("" for
// a shared connection).
func rowOwner(rec *connRecord) string { return firstNonEmpty(rec.Owner, rec.UserID) }

// forget drops this process's in-memory token of rec's chain.
func (s *Service) forget(rec *connRecord) {
	s.mu.Lock()
	delete(s.conns, memKey(rec.RowKey, rowOwner(rec)))
	s.mu.Unlock()
}

// chainOAuth is the refresh_token oauth block that continues rec's chain:
// the authorization server's token endpoint, the client, the resource on
// every refresh.
func chainOAuth(rec *connRecord, skew int) *config.OAuth {
	o := &config.OAuth{
		Enabled: true, TokenURL: rec.TokenEndpoint, GrantType: config.GrantRefreshToken, ClientID: rec.Client.ID,
		TokenField: "access_token", TokenTypeField: "token_type", ExpiresInField: "expires_in", DefaultTokenType: "Bearer",
		RefreshSkewSeconds: skew, ExtraTokenParams: map[string]string{"resource": rec.Resource},
	}
	if rec.Client.AuthMethod != mcpauth.AuthNone {
		o.ClientSecret, o.TokenEndpointAuthMethod = rec.Client.Secret, rec.Client.AuthMethod
	}
	return o
}

// connectedToken serves a token request for a server whose accounts
// people connect: the connection's token through the chain, or
// auth_required with a new link.
func (s *Service) connectedToken(ctx context.Context, srv *config.Server, req bus.TokenRequest) (*accessToken, int, error) {
	owner, user := req.Owner, connUser(srv, req.Owner, req.UserID)
	if err := s.connectReady(srv); err != nil {
		return nil, 0, err
	}
	ck := connKey(srv.Name, owner, user)
	forCatalog := user == "" && srv.OAuth.Connect != config.ConnectShared
	if forCatalog {
		// Discovery of a per-user server: nobody's call, the catalog.
		e, err := s.oauthKV.Get(ctx, catalogKey(srv.Name, owner))
		if err != nil {
			return nil, 0, bus.Errorf(bus.CodeAuthRequired, "MCP server '%s': nobody has connected an account yet; its tools are listed once someone does (GET /api/mcp/connections)", srv.Name)
		}
		ck = string(e.Value())
	}
	rec, err := s.loadRecord(ctx, ck)
	if err != nil {
		return nil, 0, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot read your connection; retry", srv.Name))
	}
	if rec == nil || rec.State != bus.ConnectionConnected {
		if forCatalog {
			return nil, 0, bus.Errorf(bus.CodeAuthRequired, "MCP server '%s': the account its tools were listed with needs to be connected again", srv.Name)
		}
		return nil, 0, s.authRequired(ctx, srv, owner, req.UserID, "")
	}
	o := chainOAuth(rec, srv.OAuth.RefreshSkewSeconds)
	chain := &config.Server{Name: srv.Name, Type: srv.Type, URL: srv.URL, OAuth: o}
	tok, err := s.tokenFor(ctx, chain, s.conn(rec.RowKey, rowOwner(rec), owner != ""), req.ForceRefresh, req.RejectedValueSHA256)
	if err != nil {
		if needsReauthorization(err) {
			rec.State = bus.ConnectionNeedsAuth
			_ = s.putSealed(ctx, s.oauthKV, ck, rec)
			_ = s.deps.Tokens.DeleteToken(ctx, store.DeleteTokenParams{Key: rec.RowKey})
			s.forget(rec)
			s.audit(ctx, firstNonEmpty(req.UserID, rec.UserID), srv.Name, actionNeedsAuth, "invalid_grant")
			s.accountChanged(rec)
			if forCatalog {
				return nil, 0, bus.Errorf(bus.CodeAuthRequired, "MCP server '%s': the account its tools were listed with needs to be connected again", srv.Name)
			}
			return nil, 0, s.authRequired(ctx, srv, owner, req.UserID, "The authorization server no longer accepts mcpbus's access to your account.")
		}
		return nil, 0, err
	}
	return tok, o.RefreshSkewSeconds, nil
}

// authRequired is the auth_required error with a new flow's link (or,
// when no flow can start, that flow's error).
func (s *Service) authRequired(ctx context.Context, srv *config.Server, owner, user, why string) error {
	if owner == "" && srv.OAuth.Connect == config.ConnectShared {
		return bus.Errorf(bus.CodeAuthRequired, "MCP server '%s' is not connected: an admin connects its account for everyone (POST /api/mcp/connections/%s/authorize)", srv.Name, srv.Name)
	}
	u, _, err := s.startFlow(ctx, srv, owner, user, user, flowScope{})
	if err != nil {
		return err
	}
	return bus.AuthRequired(srv.Name, u, why)
}

// disconnect revokes the connection's tokens where the server offers
// revocation and deletes them and the record.
func (s *Service) disconnect(ctx context.Context, srv *config.Server, owner, user, actor string) error {
	if err := s.connectReady(srv); err != nil {
		return err
	}
	ck := connKey(srv.Name, owner, connUser(srv, owner, user))
	rec, err := s.loadRecord(ctx, ck)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot read the connection; retry", srv.Name))
	}
	if rec == nil {
		return nil
	}
	s.revokeRow(ctx, rec, owner)
	if s.deps.Tokens != nil {
		if err := s.deps.Tokens.DeleteToken(ctx, store.DeleteTokenParams{Key: rec.RowKey}); err != nil {
			return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot delete the tokens; retry", srv.Name))
		}
	}
	s.forget(rec)
	if err := s.oauthKV.Delete(ctx, ck); err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s': cannot delete the connection; retry", srv.Name))
	}
	s.audit(ctx, actor, srv.Name, actionDisconnect, "ok")
	s.accountChanged(rec)
	return nil
}

// revokeRow revokes rec's refresh and access tokens at the authorization
// server (RFC 7009) when it offers revocation; failures are logged.
func (s *Service) revokeRow(ctx context.Context, rec *connRecord, owner string) {
	if rec.RevocationEndpoint == "" || s.deps.Tokens == nil {
		return
	}
	row, err := s.readRow(ctx, rec.RowKey)
	if err != nil || row == nil {
		return
	}
	hc := s.httpFor(owner)
	if rt, err := s.deps.Sealer.Open(row.RefreshTokenEnc, adRefresh(rec.RowKey)); err == nil && len(rt) > 0 {
		if err := mcpauth.Revoke(ctx, hc, rec.RevocationEndpoint, rec.Client, string(rt), "refresh_token"); err != nil {
			s.log.WarnContext(ctx, "the authorization server did not revoke the refresh token", observability.Server(rec.Server), observability.Err(err))
		}
	}
	if at, err := s.deps.Sealer.Open(row.AccessTokenEnc, adAccess(rec.RowKey)); err == nil && len(at) > 0 {
		_ = mcpauth.Revoke(ctx, hc, rec.RevocationEndpoint, rec.Client, string(at), "access_token")
	}
}

// audit records a connection change.
func (s *Service) audit(ctx context.Context, user, server, action, outcome string) {
	s.deps.Audit.Write(ctx, audit.Record{Kind: audit.KindConfig, User: user, Server: server, Action: action, Outcome: outcome})
}

// removeConnections revokes and deletes every connected account of a
// deployment server the config no longer has.
func (s *Service) removeConnections(srv *config.Server) {
	if s.oauthKV == nil || s.deps.Sealer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.base, time.Minute)
	defer cancel()
	lister, err := s.oauthKV.ListKeysFiltered(ctx, "conn.>")
	if err != nil {
		s.log.Warn("cannot list the connected accounts of a removed server", observability.Server(srv.Name), observability.Err(err))
		return
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	removed := 0
	for _, k := range keys {
		rec, err := s.loadRecord(ctx, k)
		if err != nil || rec == nil || rec.Server != srv.Name || rec.Owner != "" {
			continue
		}
		s.revokeRow(ctx, rec, "")
		if s.deps.Tokens != nil {
			_ = s.deps.Tokens.DeleteToken(ctx, store.DeleteTokenParams{Key: rec.RowKey})
		}
		s.forget(rec)
		_ = s.oauthKV.Delete(ctx, k)
		s.audit(ctx, rec.UserID, srv.Name, actionDisconnect, "server_removed")
		removed++
	}
	_ = s.oauthKV.Delete(ctx, catalogKey(srv.Name, ""))
	if removed > 0 {
		s.log.Info("revoked and deleted the connected accounts of a removed server", observability.Server(srv.Name), "accounts", removed)
	}
}
