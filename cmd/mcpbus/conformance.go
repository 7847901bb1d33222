package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/wiring"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
)

// The client leg of the official MCP conformance suite
// (@modelcontextprotocol/conformance, `conformance client`) starts a
// scenario server and runs `mcpbus conformance-client <server-url>` with
// the scenario's name in MCP_CONFORMANCE_SCENARIO (and, for some, test data
// in MCP_CONFORMANCE_CONTEXT); the server records what the client did. The
// command is the client under test: it configures the URL as the one
// upstream of an in-process mcpbus (embedded NATS, memory database, the
// tokens, discovery and toolcall services of `mcpbus dev`) and exercises
// it through the bus, as an agent would: mcpbus.tools.list (discovery:
// the era probe, initialize or server/discover, tools/list) and
// mcpbus.tools.call of the scenario's tools (toolcall's own upstream
// session). conformance/run.sh runs it; it is not in the usage text.

// conformanceServer is the upstream's name in the generated config.
const conformanceServer = "conformance"

// conformanceTimeout bounds one run; the suite kills the client at 30s.
const conformanceTimeout = 25 * time.Second

// conformanceListOnly are the scenarios whose server answers tools/list
// only: calling a tool would fail the run for nothing.
var conformanceListOnly = []string{"json-schema-ref-no-deref", "request-metadata"}

// conformanceSampleArgs are arguments for the scenario tools that require
// some (the suite's own example client sends the same).
var conformanceSampleArgs = map[string]json.RawMessage{
	"add_numbers": json.RawMessage(`{"a":2,"b":3}`),
	"valid_tool":  json.RawMessage(`{"region":"us-west1"}`),
}

// The tools of json-schema-2020-12-preservation: the one whose schema is
// echoed, and the echo.
const (
	conformanceSchemaTool = "json_schema_2020_12_tool"
	conformanceEchoTool   = "json_schema_echo"
)

// conformanceContext is MCP_CONFORMANCE_CONTEXT: the calls a scenario
// wants made (http-custom-headers), when it names any.
type conformanceContext struct {
	// ClientID and ClientSecret: a pre-registered client (auth scenarios).
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	ToolCalls    []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"toolCalls"`
}

func cmdConformanceClient(args []string, env config.Env) error {
	fs := flag.NewFlagSet("conformance-client", flag.ContinueOnError)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: MCP_CONFORMANCE_SCENARIO=<scenario> mcpbus conformance-client <server-url>")
	}
	url, scenario := pos[0], env.Get("MCP_CONFORMANCE_SCENARIO")
	var cc conformanceContext
	if raw := env.Get("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &cc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
	defer cancel()

	auth := strings.HasPrefix(scenario, "auth/")
	stack, err := startConformanceStack(ctx, url, env, auth, cc)
	if err != nil {
		return err
	}
	defer stack.stop()
	nc, names := stack.nc, stack.rt.Names
	if auth {
		if err := conformanceConnect(ctx, nc, names); err != nil {
			return err
		}
	}

	lreq := bus.ToolsListRequest{}
	if auth {
		lreq.UserID = conformanceUser
	}
	list, err := conformanceList(ctx, nc, names, lreq)
	if err != nil && auth {
		// The server refused the connected account's token even after
		// a refresh (auth/authorization-server-migration: it moved to
		// another authorization server): connect the account again, as
		// the person told so would, and list once discovery has.
		if cerr := conformanceConnect(ctx, nc, names); cerr != nil {
			return errors.Join(err, cerr)
		}
		list, err = conformanceListAgain(ctx, nc, names, lreq)
	}
	if err != nil {
		return err
	}
	visible := map[string]bus.Tool{} // by upstream name
	for _, t := range list.Tools {
		fmt.Printf("tool %s (upstream %s)\n", t.Name, t.OriginalName)
		visible[t.OriginalName] = t
	}
	if slices.Contains(conformanceListOnly, scenario) {
		return nil
	}

	type call struct {
		tool string
		args json.RawMessage
	}
	var calls []call
	switch focal, echo := visible[conformanceSchemaTool], visible[conformanceEchoTool]; {
	case len(cc.ToolCalls) > 0:
		for _, c := range cc.ToolCalls {
			t, ok := visible[c.Name]
			if !ok {
				return fmt.Errorf("the scenario asks for tool %q, which mcpbus does not list", c.Name)
			}
			calls = append(calls, call{t.Name, c.Arguments})
		}
	case focal.Name != "" && echo.Name != "":
		// json-schema-2020-12-preservation: the server diffs the schema
		// it gets back against the one it listed, so this is the
		// catalog's copy of the inputSchema, keywords and all.
		args, err := json.Marshal(map[string]json.RawMessage{"schema": focal.InputSchema})
		if err != nil {
			return err
		}
		calls = append(calls, call{echo.Name, args})
	default:
		for _, t := range list.Tools {
			calls = append(calls, call{t.Name, conformanceSampleArgs[t.OriginalName]})
		}
	}
	var errs []error
	for _, c := range calls {
		reply, err := conformanceCall(ctx, nc, names, bus.Call{Tool: c.tool, Arguments: c.args}, auth)
		if err != nil {
			errs = append(errs, fmt.Errorf("tools/call %s through mcpbus: %w", c.tool, err))
			continue
		}
		out, _ := json.Marshal(reply.Content)
		fmt.Printf("call %s: is_error=%t content=%s\n", c.tool, reply.IsError, out)
	}
	return errors.Join(errs...)
}

// conformanceList lists the tools through mcpbus; a failure to discover
// the scenario's server is an error.
func conformanceList(ctx context.Context, nc *nats.Conn, names bus.Names, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	list, err := bus.ListCatalog(ctx, nc, names.ToolsList(), req)
	if err != nil {
		return list, fmt.Errorf("tools/list through mcpbus: %w", err)
	}
	for _, f := range list.FailedServers {
		// (With a user, discovery also reports that it could not read
		// the user's personal connections: no api runs here.)
		if f.Server == conformanceServer {
			return list, fmt.Errorf("mcpbus could not discover the scenario's server: %s", f.Error)
		}
	}
	return list, nil
}

// conformanceListAgain lists until the scenario's server is discovered
// again after its account was connected again (the tokens service asks
// discovery to rediscover it; the listing shows it once that ended), or
// ctx ends.
func conformanceListAgain(ctx context.Context, nc *nats.Conn, names bus.Names, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := conformanceList(ctx, nc, names, req)
		if err == nil {
			return list, nil
		}
		select {
		case <-ctx.Done():
			return list, err
		case <-tick.C:
		}
	}
}

// conformanceStack is the in-process mcpbus a conformance run uses.
type conformanceStack struct {
	dir   string
	rt    *bootstrap.Runtime
	ns    *bus.Embedded
	db    store.Store
	group *wiring.Group
	nc    *nats.Conn
}

// stop stops what start started, in reverse, and removes the directory.
func (s *conformanceStack) stop() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.group != nil {
		if err := s.group.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "mcpbus conformance-client: stopping the services: %v\n", err)
		}
	}
	if s.db != nil {
		_ = s.db.Close()
	}
	if s.ns != nil {
		s.ns.Shutdown()
	}
	_ = os.RemoveAll(s.dir)
}

// startConformanceStack writes a config with url as the one upstream (an
// http server, tool names unprefixed) into a new temporary directory and
// starts embedded NATS and the services an agent's tools/list and
// tools/call need: tokens, discovery, toolcall.
//
// With auth the server connects an account (oauth.grant_type
// authorization_code, per user, the context's client when it names one) and
// mcpbus gets a credentials key, a sqlite database and a public URL for
// its redirect URI.
func startConformanceStack(ctx context.Context, url string, env config.Env, auth bool, cc conformanceContext) (s *conformanceStack, err error) {
	dir, err := os.MkdirTemp("", "mcpbus-conformance-")
	if err != nil {
		return nil, err
	}
	s = &conformanceStack{dir: dir}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	server := map[string]any{"type": "http", "url": url, "tool_name_prefix": false}
	settings := "database:\n  backend: memory\n"
	if auth {
		// Connected accounts keep their tokens in a database table.
		settings = "database:\n  backend: sqlite\n  path: " + filepath.Join(dir, "mcpbus.db") + "\n"
		oauth := map[string]any{"grant_type": config.GrantAuthorizationCode, "connect": config.ConnectPerUser}
		if cc.ClientID != "" {
			oauth["client_id"], oauth["client_secret"] = cc.ClientID, cc.ClientSecret
		}
		server["oauth"] = oauth
		settings += "api:\n  public_url: " + conformancePublicURL + "\n"
		// The client ID metadata document lives where the suite's
		// example client's does, as an operator's own stable URL
		// (api.oauth_client_id_url).
		settings += "  oauth_client_id_url: " + conformanceClientIDURL + "\n"
		key, err := crypto.NewKey()
		if err != nil {
			return s, err
		}
		env = env.With(config.EnvCredentialsKey, key)
	}
	ext, err := json.Marshal(map[string]any{"mcpServers": map[string]any{conformanceServer: server}})
	if err != nil {
		return s, err
	}
	extPath, cfgPath := filepath.Join(dir, "extensions_config.json"), filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(extPath, ext, 0o600); err != nil {
		return s, err
	}
	if err := os.WriteFile(cfgPath, []byte(settings), 0o600); err != nil {
		return s, err
	}
	rt, err := bootstrap.Load(bootstrap.Options{ConfigPath: cfgPath, ExtensionsPath: extPath}, env, os.Stderr)
	if err != nil {
		return s, err
	}
	s.rt = rt
	token, err := bus.NewToken()
	if err != nil {
		return s, err
	}
	tokenFile := filepath.Join(dir, "nats.token")
	if err := writePrivate(tokenFile, token+"\n"); err != nil {
		return s, err
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: filepath.Join(dir, "nats"), Token: token})
	if err != nil {
		return s, err
	}
	s.ns = ns
	rt.Settings.NATS.URL = ns.URL()
	rt.Settings.NATS.CredentialsFile, rt.Settings.NATS.TokenFile = "", tokenFile
	db, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
	if err != nil {
		return s, err
	}
	s.db = db
	var services []wiring.Service
	for _, name := range []string{"tokens", "discovery", "toolcall"} {
		svc, _ := wiring.ByName(name)
		services = append(services, svc)
	}
	if s.group, err = wiring.Start(ctx, rt, db, services, wiring.Hooks{}); err != nil {
		return s, err
	}
	if s.nc, err = bus.Connect(ns.URL(), "mcpbus-conformance-client", rt.NATSAuth(), rt.Log); err != nil {
		return s, err
	}
	return s, nil
}

// conformancePublicURL is the api.public_url of an auth run: nothing
// listens there; the driver reads the authorization server's redirect to
// <public_url>/oauth/callback instead of following it, as a browser would
// deliver it to the api's callback.
const conformancePublicURL = "http://localhost:3000"

// conformanceClientIDURL is the client ID metadata document URL the
// suite expects a client to use (auth/basic-cimd).
const conformanceClientIDURL = "https://conformance-test.local/client-metadata.json"

// conformanceUser connects its account on the scenario server and makes
// the calls.
const conformanceUser = "conformance"

// conformanceMaxAuthorizations bounds the links one call follows (a
// step-up after a 403 insufficient_scope); the tokens service has its own
// limit per connection.
const conformanceMaxAuthorizations = 3

// conformanceCall makes a tool call as the user; with auth, a call
// answered auth_required (a step-up: the server wants a wider scope) has
// its link followed, as the person would, and is made again.
func conformanceCall(ctx context.Context, nc *nats.Conn, names bus.Names, req bus.Call, auth bool) (bus.ToolsCallReply, error) {
	if auth {
		req.UserID = conformanceUser
	}
	for n := 0; ; n++ {
		reply, err := bus.Request[bus.ToolsCallReply](ctx, nc, names.ToolsCall(), req)
		var be *bus.Error
		if err == nil || !auth || n == conformanceMaxAuthorizations || !errors.As(err, &be) || be.Code != bus.CodeAuthRequired {
			return reply, err
		}
		link, _ := be.Details["authorize_url"].(string)
		if link == "" {
			return reply, err
		}
		if err := conformanceAuthorize(ctx, nc, names, link); err != nil {
			return reply, err
		}
	}
}

// conformanceConnect plays the person who connects the account: it asks
// the tokens service for an authorization link (what POST
// /api/mcp/connections/{server}/authorize does: discovery from the
// server's 401, client identity, PKCE, state), opens it as a user agent
// (the scenario's authorization server redirects at once, no login) and
// hands the redirect's query to the callback subject, as the api's GET
// /oauth/callback does.
func conformanceConnect(ctx context.Context, nc *nats.Conn, names bus.Names) error {
	start, err := bus.Request[bus.OAuthAuthorizeReply](ctx, nc, names.InternalOAuthAuthorize(),
		bus.OAuthAuthorizeRequest{Server: conformanceServer, UserID: conformanceUser})
	if err != nil {
		return fmt.Errorf("starting the authorization through mcpbus: %w", err)
	}
	return conformanceAuthorize(ctx, nc, names, start.AuthorizeURL)
}

// conformanceAuthorize follows an authorization link and completes the
// flow at mcpbus's callback.
func conformanceAuthorize(ctx context.Context, nc *nats.Conn, names bus.Names, link string) error {
	cb, err := conformanceFollow(ctx, link)
	if err != nil {
		return err
	}
	q := cb.Query()
	if _, err := bus.Request[bus.OAuthCallbackReply](ctx, nc, names.InternalOAuthCallback(), bus.OAuthCallbackRequest{
		State: q.Get("state"), Code: q.Get("code"), Iss: q.Get("iss"), Error: q.Get("error"), ErrorDescription: q.Get("error_description"),
	}); err != nil {
		return fmt.Errorf("the authorization callback through mcpbus: %w", err)
	}
	return nil
}

// conformanceFollow opens the authorization URL as a user agent and
// returns the redirect to mcpbus's callback.
func conformanceFollow(ctx context.Context, authorizeURL string) (*url.URL, error) {
	hc := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), conformancePublicURL+"/") {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authorizeURL, nil)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("opening the authorization URL: %w", err)
	}
	_ = resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || !strings.HasPrefix(loc.String(), conformancePublicURL+"/oauth/callback") {
		return nil, fmt.Errorf("the authorization server answered %s without a redirect to mcpbus's callback", resp.Status)
	}
	return loc, nil
}
