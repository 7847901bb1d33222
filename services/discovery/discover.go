package discovery

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/egress"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// TokenSource returns the Authorization header (name and secret value) of a
// server's OAuth connection; *tokenclient.Client satisfies it.
type TokenSource interface {
	Header(ctx context.Context, req bus.TokenRequest) (name, value string, expiresAt time.Time, err error)
}

// discoverer opens ephemeral sessions to upstream servers.
type discoverer struct {
	log      *slog.Logger
	tokens   TokenSource
	upstream config.Upstream
	// egress guards the connections of personal http/sse servers.
	egress *egress.Policy
	// personal is the launch policy of personal stdio connections: a
	// personal stdio server is started only as it says.
	personal *launchpolicy.Personal
}

// discover opens an ephemeral session (spawn or connect, initialize,
// tools/list with pagination) under the server's session_init_timeout as one
// deadline, and closes it. ctx is the service's lifetime, not a request's:
// a discovery outlives the request that started it. owner is the user whose
// personal connection srv is ("" for a deployment server): its OAuth token
// is that user's.
func (d *discoverer) discover(ctx context.Context, srv *config.Server, owner string) (_ discovered, err error) {
	ctx, span := tracing.Start(ctx, "discover server", tracing.Server(srv.Name), tracing.TransportKind(srv.Type))
	defer func() { bus.EndSpan(span, err) }()
	out, err := d.session(ctx, srv, owner)
	if err != nil {
		return discovered{}, redacted(srv, err)
	}
	return out, nil
}

// session is discover without the redaction of its errors.
func (d *discoverer) session(ctx context.Context, srv *config.Server, owner string) (discovered, error) {
	var hc *http.Client
	if owner != "" {
		srv = d.upstream.Personal(srv)
		if srv.Type != config.TransportStdio {
			if err := d.egress.CheckURL(srv.URL); err != nil {
				return discovered{}, bus.Wrap(bus.CodeConfigError, err, fmt.Sprintf("MCP server '%s': url %s", srv.Name, cmp.Or(bus.UserMessage(err), "refused by the egress policy")))
			}
			hc = d.egress.HTTPClient()
		}
	}
	if srv.FollowRedirects && hc == nil {
		// A deployment server that follows redirects: every hop passes
		// the egress policy's URL check.
		hc = mcpclient.SharedHTTPClient()
		hc.CheckRedirect = d.egress.CheckRedirect
	}
	if srv.SessionInitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, srv.SessionInitTimeout)
		defer cancel()
	}
	spec := mcpclient.Spec{
		Server: srv.Name, Transport: srv.Type,
		Command: srv.Command, Args: srv.Args, Env: srv.Env, Dir: srv.Cwd,
		URL: srv.URL, Secrets: srv.SecretValues(), HTTPClient: hc, FollowRedirects: srv.FollowRedirects,
		MaxResponseBytes: d.upstream.ResponseLimit(srv),
		Logger:           d.log.With(observability.Server(srv.Name)),
		ClientName:       "mcpbus-discovery", ClientVersion: "0.1.0",
		// A discovery probes the protocol era anew (no era cache): the era
		// it settles on goes into the catalog, from which toolcall seeds
		// its own cache.
		Reprobe: true,
	}
	if owner != "" && srv.Type == config.TransportStdio {
		// A personal stdio server runs only as the personal launch policy
		// says, checked now (a definition stored under an older policy is
		// refused here), isolated under the owner's uid in the owner's
		// workspace, or not at all.
		l, err := d.personal.Launch(owner, srv)
		if err != nil {
			d.log.Warn("personal stdio server not started", observability.Server(srv.Name), observability.Err(err))
			return discovered{}, bus.WrapUser(bus.CodeConfigError, err, fmt.Sprintf("personal MCP server '%s' cannot be launched: its uid or workspace cannot be prepared", srv.Name))
		}
		l.Apply(&spec)
	} else if err := srv.ValidateCwd(); err != nil {
		return discovered{}, bus.WrapUser(bus.CodeConfigError, err, fmt.Sprintf("MCP server '%s': its configured cwd cannot be used", srv.Name))
	}
	treq := bus.TokenRequest{Server: srv.Name, Owner: owner, ConfigFingerprint: srv.Fingerprint}
	for attempt := 0; ; attempt++ {
		headers, token, err := d.headers(ctx, srv, treq)
		if err != nil {
			return discovered{}, tokenError(ctx, srv, err)
		}
		spec.Headers = headers
		out, err := d.list(ctx, srv, spec)
		if err == nil || !srv.ConnectsAccounts() || !errors.Is(err, mcpclient.ErrAuthorizationRequired) {
			return out, err
		}
		if attempt > 0 {
			// The connection's fresh token is refused too: the account
			// must be connected again (the server may have moved to
			// another authorization server). Never read as an empty
			// catalog or a server of another era.
			return discovered{}, bus.Wrap(bus.CodeAuthRequired, err, fmt.Sprintf("MCP server '%s' refused the access token of the connected account its tools are listed with: connect the account again (POST /api/mcp/connections/%s/authorize, or Reconnect in the console's My connections)", srv.Name, srv.Name))
		}
		// toolcall's rule: one forced refresh naming the refused value's
		// hash (a token connected since then is handed out instead of a
		// refresh), then one retry.
		sum := sha256.Sum256([]byte(token))
		treq.ForceRefresh, treq.RejectedValueSHA256 = true, hex.EncodeToString(sum[:])
	}
}

// list connects with spec, lists the tools and the federated lists, and
// closes the session.
func (d *discoverer) list(ctx context.Context, srv *config.Server, spec mcpclient.Spec) (discovered, error) {
	c, err := mcpclient.Connect(ctx, spec)
	if err != nil {
		return discovered{}, initError(ctx, srv, err)
	}
	defer func() { _ = c.Close() }()
	tools, err := c.ListTools(ctx)
	if err != nil {
		return discovered{}, initError(ctx, srv, fmt.Errorf("tools/list: %w", err))
	}
	info := c.ServerInfo()
	return discovered{tools: tools, era: info.Era, protocolVersion: info.ProtocolVersion, fed: discoverFed(ctx, c, srv)}, nil
}

// headers returns the static headers plus, for an http or sse server with
// OAuth enabled, the token service's Authorization header (replacing a
// static header of the same name, compared case-insensitively). Without
// the token it returns an error and the server is not discovered: a
// discovery without the credentials the server is configured with is never
// cached (it fails this pass, and a later lookup retries it). The token
// client waits for a tokens service that is not up yet within ctx (the
// server's session_init_timeout). A personal connection's token is asked
// for with its owner (the tokens service keys its row by runtime name and
// owner). token is the token's header value ("" without OAuth).
func (d *discoverer) headers(ctx context.Context, srv *config.Server, treq bus.TokenRequest) (_ map[string]string, token string, _ error) {
	if srv.Type == config.TransportStdio || !srv.OAuthEnabled() {
		return srv.Headers, "", nil
	}
	if d.tokens == nil {
		return nil, "", bus.Errorf(bus.CodeUnavailable, "no token service client is configured")
	}
	name, value, _, err := d.tokens.Header(ctx, treq)
	if err != nil {
		return nil, "", err
	}
	if name == "" {
		name = "Authorization"
	}
	out := make(map[string]string, len(srv.Headers)+1)
	for k, v := range srv.Headers {
		if !strings.EqualFold(k, name) {
			out[k] = v
		}
	}
	out[name] = value
	return out, value, nil
}

// redacted returns err with srv's secret values and every URL's userinfo
// and query string removed from its message and cause: what
// failed_servers, the server status and the logs show. mcpclient already
// redacts what it knows; this also covers text from elsewhere, such as the
// tokens service's message.
func redacted(srv *config.Server, err error) error { return bus.Redact(err, srv.Redactor()) }

// initError turns a failed discovery into a coded error naming the server.
func initError(ctx context.Context, srv *config.Server, err error) error {
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return bus.Wrap(bus.CodeInitTimeout, err, fmt.Sprintf("MCP server '%s' did not finish discovery within session_init_timeout (%s)", srv.Name, srv.SessionInitTimeout))
	}
	if ctx.Err() != nil {
		return bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("MCP server '%s' discovery was cancelled (the connection was removed, or the service is stopping)", srv.Name))
	}
	return bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("MCP server '%s' discovery failed: %v", srv.Name, err))
}

// tokenError is a discovery that did not start because the server's OAuth
// token is unavailable. Token errors never carry a secret.
func tokenError(ctx context.Context, srv *config.Server, err error) error {
	be := bus.AsError(err)
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return bus.Wrap(bus.CodeInitTimeout, err, fmt.Sprintf("MCP server '%s' was not discovered: no OAuth access token within session_init_timeout (%s): %s", srv.Name, srv.SessionInitTimeout, be.Message))
	}
	return bus.Wrap(be.Code, err, fmt.Sprintf("MCP server '%s' was not discovered without its OAuth access token: %s", srv.Name, be.Message))
}
