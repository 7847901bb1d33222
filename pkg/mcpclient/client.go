package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/redact"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// Transports accepted in [Spec.Transport].
const (
	TransportStdio = "stdio"
	TransportSSE   = "sse"
	TransportHTTP  = "http"
)

// ProtocolVersion is the MCP protocol version a legacy-era client asks
// for (see [Era]).
const ProtocolVersion = mcp.ProtocolVersion20251125

// Defaults for [Spec.ClientName] and [Spec.ClientVersion].
const (
	DefaultClientName    = "mcpbus"
	DefaultClientVersion = "dev"
)

// connectErrStderr is how much of a stdio child's stderr tail a failed
// Connect quotes in its error.
const connectErrStderr = 512

// maxToolPages bounds tools/list pagination against servers that never stop.
const maxToolPages = 1000

// Spec describes one upstream MCP server connection.
type Spec struct {
	// Server names the server in errors and logs. Required.
	Server string
	// Transport is "stdio", "sse" or "http" (streamable HTTP). Defaults to
	// "stdio".
	Transport string

	// Command is the stdio program. A relative path containing a slash is
	// resolved against the current working directory before Dir applies; a
	// bare name is looked up in PATH.
	Command string
	// Args are the stdio program's arguments.
	Args []string
	// Env is added to the base environment (see InheritEnv); it wins over
	// the base for the same name.
	Env map[string]string
	// Dir is the stdio child's working directory. Defaults to the current
	// one.
	Dir string
	// InheritEnv starts the stdio child's environment from os.Environ().
	// When false the base is minimal: PATH, HOME, USER, LOGNAME, SHELL, LANG,
	// LC_ALL, LC_CTYPE, TZ, TMPDIR, TMP and TEMP, where set.
	InheritEnv bool
	// EmptyEnv gives the stdio child no variable of this process at all:
	// its environment is Env (and PWD). It wins over InheritEnv.
	EmptyEnv bool
	// RunAs runs the stdio child under another uid and gid, with no
	// supplementary groups (this process must be root). Nil keeps ours.
	RunAs *Credential
	// Isolate runs the stdio child (Linux, as root, with RunAs set) in PID,
	// mount and IPC namespaces of its own, with a /proc of its own: it sees
	// no process but its descendants, not the gateway's nor other
	// children's, and when it exits or is killed every process of its
	// namespace dies with it. Connect fails, saying why, where that cannot
	// be had ([IsolationUnavailable]).
	Isolate bool

	// URL is the streamable HTTP endpoint (http) or the SSE stream URL (sse).
	URL string
	// Headers are sent with every HTTP request, the SSE stream included.
	Headers map[string]string
	// FollowRedirects follows the server's HTTP redirects (at most 10),
	// each hop checked by HTTPClient's CheckRedirect when set; a hop to
	// another origin (scheme, host, port) carries none of Headers, the
	// call's headers or the session id. False (the default): a redirect
	// fails the request with ErrRedirect and nothing is sent to its target.
	FollowRedirects bool
	// HTTPClient is used for http and sse when set (e.g. one with an
	// oauth2.Transport). It must not set Timeout: that would cut long calls
	// and the SSE stream; use ctx deadlines instead. Close (and a failed
	// Connect) closes its idle connections: give each connection its own
	// client when nothing may stay open after it.
	HTTPClient *http.Client

	// MaxResponseBytes caps one response of the server: an HTTP body, an
	// SSE event or a stdio line, read as a stream and cut off once the cap
	// is crossed (the call fails with a *ResponseTooLargeError; a stdio or
	// SSE session is closed). 0 means DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// Secrets are further values to keep out of errors, logs and the stderr
	// tail, besides Headers, Env and the URL's userinfo and query values,
	// which always are: the server's configured secrets (OAuth secrets,
	// tokens in Args; config.Server.SecretValues).
	Secrets []string

	// OnListChanged, when set, is called with "tools", "prompts" or
	// "resources" for each notifications/<list>/list_changed the server
	// sends (notify.go). It runs on the transport's reader goroutine: it
	// must return at once and must never call back into the Client.
	OnListChanged func(list string)

	// Logger receives transport logs and the stderr lines of stdio children
	// (at Debug), with a "server" attribute, redacted like errors. Defaults
	// to discarding.
	Logger *slog.Logger

	// OnResourceUpdated, when set, receives the uri of every
	// notifications/resources/updated the server sends (the raw URI, as the
	// server wrote it). It runs on the transport's reader: it must return
	// quickly and must not call back into the client synchronously. Over
	// streamable HTTP it also opens the legacy session's GET stream, where
	// a server sends notifications outside any request.
	OnResourceUpdated func(uri string)

	// ClientName and ClientVersion are sent as clientInfo. They default to
	// DefaultClientName and DefaultClientVersion.
	ClientName, ClientVersion string

	// Era is the protocol era to speak. "" (the default) uses the era Eras
	// last settled on for the same origin (URL, or command line and
	// directory) and otherwise probes the server: server/discover, and
	// 2026-07-28 only when its supportedVersions lists it, else 2025-11-25
	// with initialize. A cached (or given) legacy era skips the probe; the
	// modern era's handshake is server/discover itself, so a modern
	// connection sends one request to start either way. EraModern fails
	// against a server that does not list 2026-07-28. sse is always legacy.
	Era Era
	// Reprobe ignores the cached era of the origin and probes again (the
	// result replaces the cached one): what discovery does when it
	// discovers a server anew.
	Reprobe bool
	// Eras is the service's era cache: Connect reads the origin's era from
	// it and stores the era it settles on. Nil: every Connect without Era
	// probes.
	Eras *EraCache
}

// Credential is a uid and gid for [Spec.RunAs].
type Credential struct {
	UID, GID uint32
}

// Tool is one tool definition, with the JSON parts exactly as the server
// sent them.
type Tool struct {
	Name, Title, Description string
	// InputSchema, OutputSchema and Annotations are nil when absent.
	InputSchema, OutputSchema, Annotations json.RawMessage
	// Meta is the tool's _meta, nil when absent.
	Meta json.RawMessage
	// Execution is the tool's execution object (taskSupport), nil when
	// absent.
	Execution json.RawMessage
	// Raw is the whole definition (icons, execution and any future field
	// included).
	Raw json.RawMessage
}

// CallResult is the result of a tools/call.
type CallResult struct {
	// Content holds the content blocks as MCP defines them
	// ({"type":"text","text":…} and so on).
	Content []json.RawMessage
	// StructuredContent is the structuredContent bytes as received, nil when
	// absent.
	StructuredContent json.RawMessage
	// IsError reports a tool-level error; the call itself succeeded.
	IsError bool
	// Meta is the result's _meta, nil when absent.
	Meta json.RawMessage
	// InputRequired is set when a modern server asked for more input
	// instead of answering (Content is then empty; bridge.go).
	InputRequired *InputRequired
}

// ServerInfo is what the server said about itself when initializing
// (initialize, or server/discover in the modern era).
type ServerInfo struct {
	Name, Version string
	// Era is the protocol era of the connection.
	Era Era
	// ProtocolVersion is the negotiated protocol version.
	ProtocolVersion string
	Instructions    string
	// ToolsListChanged reports that the server sends tools/list_changed.
	ToolsListChanged bool
	// Logging reports that the server declared the logging capability.
	Logging bool
	// Features is what the server declared beyond tools (federation.go).
	Features Features
}

// Client is a connected MCP client. Its methods are safe for concurrent use.
type Client struct {
	server string
	kind   string
	logger *slog.Logger
	mc     *client.Client
	info   ServerInfo

	// modern is set for a 2026-07-28 connection: every request carries the
	// protocol _meta (and, over HTTP, Mcp-Method/Mcp-Name); clientInfo is
	// what that _meta names.
	modern     bool
	clientInfo mcp.Implementation

	// redactor keeps the static header values, the env values and the URL's
	// userinfo and query out of errors, logs and the stderr tail.
	redactor *redact.Redactor

	// limit is Spec.MaxResponseBytes; streamTrip is set once a stream
	// (stdio stdout, the legacy SSE stream) crossed it.
	limit      int64
	streamTrip atomic.Bool

	// stdio only.
	proc   *process
	pipes  *pipedStdio
	stderr *stderrSink
	exited <-chan struct{} // closed when the child exits; nil if unknown

	// hc is Spec.HTTPClient, whose idle connections shutdown closes.
	hc *http.Client

	// cancelLife ends the long-lived context the transport was started
	// with, life.
	life       context.Context
	cancelLife context.CancelFunc
	// bg is the modern subscriptions/listen (notify.go), which shutdown
	// waits for.
	bg sync.WaitGroup
	// gate holds a legacy HTTP session's GET stream (notify.go).
	gate *listenGate
	// listenAck is closed by the listen's acknowledgement (notify.go).
	listenAck atomic.Pointer[chan struct{}]
	// resListen is the modern resource subscriptions' listen (listen.go);
	// listFilter the list_changed flags of the changes' listen (set in
	// Connect, read-only after).
	resListen  resourceListen
	listFilter map[string]bool

	// progress routes notifications/progress to the calls asking for
	// them (CallOptions.Progress).
	progress progressRouter
	// logs routes notifications/message to the calls asking for them
	// (CallOptions.Log); onListChanged is Spec.OnListChanged (notify.go).
	logs          logRouter
	onListChanged func(list string)

	// asks counts the requests the server sent the client, asked is the
	// last one's method (serverRequest).
	asks  atomic.Uint64
	asked atomic.Pointer[string]
	// askers are the calls that answer the server's requests
	// (CallOptions.ServerRequests).
	askers askers

	reqSeq    atomic.Uint64
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Connect starts the transport described by spec and performs the
// initialize handshake. ctx bounds only this setup (spawn, SSE endpoint,
// initialize): when it ends first, Connect fails with ctx's error and leaves
// nothing running. The connection lives until Close.
func Connect(ctx context.Context, spec Spec) (*Client, error) {
	if err := spec.normalize(); err != nil {
		return nil, fmt.Errorf("mcp server %q: invalid spec: %w", spec.Server, err)
	}
	era, err := spec.resolveEra()
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: invalid spec: %w", spec.Server, err)
	}
	cachedEra := era != "" && spec.Era == ""
	logger := spec.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		server:   spec.Server,
		kind:     spec.Transport,
		redactor: spec.redactor(),
		limit:    spec.MaxResponseBytes,
		hc:       spec.HTTPClient,

		onListChanged: spec.OnListChanged,
		clientInfo:    mcp.Implementation{Name: spec.ClientName, Version: spec.ClientVersion},
	}
	if c.limit <= 0 {
		c.limit = DefaultMaxResponseBytes
	}
	c.logger = redact.Logger(logger, c.redactor).With("server", spec.Server)
	if err := ctx.Err(); err != nil {
		return nil, c.wrap("connect", err, nil)
	}

	var (
		tr    transport.Interface
		abort func()
	)
	switch spec.Transport {
	case TransportStdio:
		tr, err = c.newStdioTransport(spec)
		abort = c.proc.kill
	case TransportHTTP:
		tr, err = c.newStreamableTransport(spec, era)
	case TransportSSE:
		tr, err = c.newSSETransport(spec)
	}
	if err != nil {
		return nil, c.wrap("connect", err, nil)
	}
	if abort == nil {
		abort = func() { _ = tr.Close() }
	}
	// Pinned: mcp-go's own discover probe trusts any answer (notes §0.1);
	// the probe is ours (handshake), and a modern connection never calls
	// Initialize.
	c.mc = client.NewClient(tr, client.WithProtocolVersion(ProtocolVersion))
	c.mc.OnNotification(c.dispatch)
	if fn := spec.OnResourceUpdated; fn != nil {
		c.mc.OnNotification(resourceUpdatedHandler(fn))
	}

	// The transport outlives ctx: the stdio child, the SSE stream and server
	// requests all hang off this context, which only Close cancels.
	life, cancel := context.WithCancel(context.Background())
	c.life, c.cancelLife = life, cancel

	// Abort the setup when ctx ends, whatever step it is blocked in.
	stop := context.AfterFunc(ctx, abort)
	err = c.mc.Start(life)
	if c.proc != nil {
		c.proc.markStarted()
	}
	if b, ok := tr.(transport.BidirectionalInterface); ok && err == nil {
		// Replaces mcp-go's handler (Start set it): requests to the client
		// are refused and remembered (bridge.go).
		b.SetRequestHandler(c.serverRequest)
	}
	var ir *mcp.InitializeResult
	if err == nil {
		ir, err = c.handshake(ctx, spec, era)
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if cachedEra {
			// The server may have changed: the next Connect probes again.
			spec.Eras.forget(spec.origin())
		}
		if cerr := c.shutdown(); cerr != nil {
			c.logger.Warn("mcp client cleanup after failed connect", "error", cerr)
		}
		if c.stderr != nil {
			if tail := c.stderr.lastLines(connectErrStderr); tail != "" {
				err = &stderrError{err: err, tail: tail}
			}
		}
		return nil, c.wrapCtx(ctx, "connect", err, nil)
	}
	if c.proc != nil {
		c.exited = watchExit(c.proc.pid())
	}
	era = EraLegacy
	if c.modern {
		era = EraModern
	}
	spec.Eras.store(spec.origin(), era)
	c.info = ServerInfo{
		Name:            ir.ServerInfo.Name,
		Version:         ir.ServerInfo.Version,
		Era:             era,
		ProtocolVersion: ir.ProtocolVersion,
		Instructions:    ir.Instructions,
	}
	if ir.Capabilities.Tools != nil {
		c.info.ToolsListChanged = ir.Capabilities.Tools.ListChanged
	}
	c.info.Logging = ir.Capabilities.Logging != nil
	c.info.Features = featuresOf(ir.Capabilities)
	c.gate.decide(!c.modern && (announcesChanges(ir.Capabilities) || (spec.OnResourceUpdated != nil && announcesUpdates(ir.Capabilities))))
	c.listenForChanges(ctx, ir.Capabilities)
	return c, nil
}

// redactor lists what errors, logs and stderr must not show: the header
// and env values, the URL's userinfo and query values, and Secrets.
func (s *Spec) redactor() *redact.Redactor {
	values := slices.Clone(s.Secrets)
	for _, v := range s.Headers {
		values = append(values, v)
	}
	for _, v := range s.Env {
		values = append(values, v)
	}
	return redact.New(append(values, redact.URLSecrets(s.URL)...)...)
}

// normalize applies defaults and validates spec.
func (s *Spec) normalize() error {
	if s.Server == "" {
		return errors.New("server name (Spec.Server) is required")
	}
	if s.Transport == "" {
		s.Transport = TransportStdio
	}
	if s.ClientName == "" {
		s.ClientName = DefaultClientName
	}
	if s.ClientVersion == "" {
		s.ClientVersion = DefaultClientVersion
	}
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			return errors.New("command (Spec.Command) is required for stdio")
		}
	case TransportHTTP, TransportSSE:
		if s.URL == "" {
			return fmt.Errorf("URL (Spec.URL) is required for %s", s.Transport)
		}
		if err := validateHeaders(s.Headers); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown transport %q (want stdio, sse or http)", s.Transport)
	}
	return nil
}

// ServerInfo returns what the server reported when initializing.
func (c *Client) ServerInfo() ServerInfo { return c.info }

// ListTools returns every tool of the server, following pagination.
// Definitions that lack a name are skipped (and logged).
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	err := c.walkPages(ctx, "list tools", string(mcp.MethodToolsList), "tools", func(items []json.RawMessage) {
		for _, r := range items {
			t, err := parseTool(r)
			if err != nil {
				c.logger.Warn("mcp server sent an invalid tool definition", "error", err)
				continue
			}
			if c.modern && c.kind == TransportHTTP {
				if err := validParamAnnotations(t); err != nil {
					// 2026-07-28: a client over streamable HTTP MUST
					// exclude such a tool (paramheaders.go).
					c.logger.Warn("mcp server sent a tool with invalid x-mcp-header annotations; leaving it out", "tool", t.Name, "error", err)
					continue
				}
			}
			tools = append(tools, t)
		}
	})
	if err != nil {
		return nil, err
	}
	return tools, nil
}

// walkPages sends the list method page by page (at most maxToolPages,
// refusing a repeated cursor) and hands each page's items, the result's
// field, to each. op names the operation in errors.
func (c *Client) walkPages(ctx context.Context, op, method, field string, each func([]json.RawMessage)) error {
	if c.closed.Load() {
		return c.wrap(op, ErrClosed, nil)
	}
	var (
		cursor string
		seen   = map[string]bool{}
	)
	for page := 0; ; page++ {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		raw, err := c.rawRequest(ctx, method, params)
		if err != nil {
			return c.wrapCtx(ctx, op, err, nil)
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			return c.wrap(op, fmt.Errorf("decoding %s result: %w", method, err), nil)
		}
		var items []json.RawMessage
		if b := res[field]; len(b) > 0 && string(b) != "null" {
			if err := json.Unmarshal(b, &items); err != nil {
				return c.wrap(op, fmt.Errorf("decoding %s result: %s: %w", method, field, err), nil)
			}
		}
		each(items)
		var next string
		if b := res["nextCursor"]; len(b) > 0 {
			if err := json.Unmarshal(b, &next); err != nil {
				return c.wrap(op, fmt.Errorf("decoding %s result: nextCursor: %w", method, err), nil)
			}
		}
		if next == "" {
			return nil
		}
		if seen[next] {
			return c.wrap(op, errors.New("server repeated a pagination cursor"), nil)
		}
		if page+1 >= maxToolPages {
			return c.wrap(op, fmt.Errorf("more than %d pages", maxToolPages), nil)
		}
		seen[next] = true
		cursor = next
	}
}

// rawRequest sends one JSON-RPC request through the transport and returns
// its result bytes untouched. tools/list goes this way because mcp-go's
// typed Tool drops schema keywords it does not model.
func (c *Client) rawRequest(ctx context.Context, method string, params any) (json.RawMessage, error) {
	_, raw, err := c.send(ctx, method, params)
	return raw, err
}

// nextID is a new request id.
func (c *Client) nextID() mcp.RequestId {
	return mcp.NewRequestId("mcpbus-" + strconv.FormatUint(c.reqSeq.Add(1), 10))
}

// send is rawRequest that also returns the id of the request it sent (nil
// when ctx had already ended and nothing was sent).
func (c *Client) send(ctx context.Context, method string, params any) (mcp.RequestId, json.RawMessage, error) {
	return c.sendID(ctx, c.nextID(), method, params)
}

// sendID is send with the request's id chosen by the caller, for a
// request whose id its caller must know before it is sent (a listen,
// whose acknowledgement names it).
func (c *Client) sendID(ctx context.Context, id mcp.RequestId, method string, params any) (mcp.RequestId, json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return mcp.RequestId{}, nil, err
	}
	if ctx.Value(backgroundKey{}) == nil {
		defer c.logs.begin(ctx)()
	}
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      id,
		Method:  method,
		Params:  params,
	}
	x := exchangeOf(ctx)
	if x == noExchange {
		x = &exchange{}
		ctx = withExchange(ctx, x)
	}
	x.trip.Store(false)
	x.trip.challenge.Store(nil)
	if c.modern {
		// The raw path skips mcp-go's own per-request metadata. tools/call
		// (the hot path) carries it in its _meta struct; other params are
		// merged through a map.
		caps := x.caps
		if p, ok := params.(callToolParams); ok {
			req.Params = c.withProtocolMeta(p, caps)
		} else {
			req.Params = modernMeta(params, ModernProtocolVersion, c.clientInfo, caps)
		}
		if c.kind == TransportHTTP { // only streamable HTTP has headers
			req.Header = standardHeaders(method, req.Params)
			if schema := x.schema; method == string(mcp.MethodToolsCall) && req.Header != nil && len(schema) > 0 {
				if b, err := json.Marshal(req.Params); err == nil {
					paramHeaders(req.Header, schema, b)
				}
			}
		}
	}
	resp, err := c.mc.GetTransport().SendRequest(ctx, req)
	if ch := x.trip.challenge.Load(); ch != nil {
		// A 403 with a challenge: mcp-go reads its body as a response
		// (or fails on it); the challenge is what the caller needs.
		return id, nil, &ForbiddenError{Challenges: *ch}
	}
	if err != nil {
		if x.trip.Load() || c.streamTrip.Load() {
			// mcp-go reports a cut stream as "unexpected nil response" or
			// a closed transport; say why.
			err = c.tooLarge()
		}
		return id, nil, err
	}
	if resp.Error != nil {
		rpc := &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, err: resp.Error.AsError()}
		if rpc.Code == CodeMissingRequiredClientCapability {
			return id, nil, missingCapability(rpc, resp.Error.Data)
		}
		return id, nil, rpc
	}
	return id, resp.Result, nil
}

func parseTool(raw json.RawMessage) (Tool, error) {
	var t struct {
		Name         string          `json:"name"`
		Title        string          `json:"title"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
		Meta         json.RawMessage `json:"_meta"`
		Execution    json.RawMessage `json:"execution"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, err
	}
	if t.Name == "" {
		return Tool{}, errors.New("tool without a name")
	}
	return Tool{
		Name:         t.Name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  nonNull(t.InputSchema),
		OutputSchema: nonNull(t.OutputSchema),
		Annotations:  nonNull(t.Annotations),
		Meta:         nonNull(t.Meta),
		Execution:    nonNull(t.Execution),
		Raw:          bytes.Clone(raw),
	}, nil
}

// nonNull returns nil for an absent or JSON null value.
func nonNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return b
}

// CallTool calls the named tool with args, a JSON object (nil or null sends
// no arguments). headers are HTTP headers for this request only: they replace
// Spec.Headers of the same name, compared case-insensitively. For stdio they
// are sent as the request's _meta.headers instead. They are sent as given:
// the caller checks names and values (package headers' rules) where it
// assembles them, once (toolcall's header sources); an invalid one is
// refused by net/http without its value in the error. A tool-level failure
// is a result with IsError set, not an error.
//
// The result's content blocks, structuredContent and _meta are the bytes the
// server sent: nothing is decoded into Go types and encoded again, so every
// block kind (and any field a newer server adds) passes through unchanged.
// A call whose ctx ends first sends the server notifications/cancelled
// naming it, over stdio and legacy HTTP (mcp-go's client sends it on stdio
// only; over legacy HTTP the aborted POST alone may not stop the server's
// work); in the modern era over HTTP the aborted POST is the cancellation.
// Everything else the call carries is in o (nil: nothing), never in ctx:
// with o.Progress the call asks for progress and hands each
// notifications/progress to it.
//
// Bridging (bridge.go): o.Input gives a modern call the
// client's capabilities and the answers of a retry; a modern server's
// input_required answer is a result with InputRequired set (and no
// content); a call that fails (or whose result is an error) after the
// server sent the client a request mcpbus refused fails with an
// *UnservedRequestError.
func (c *Client) CallTool(ctx context.Context, name string, args json.RawMessage, o *CallOptions) (*CallResult, error) {
	asks := c.asks.Load()
	raw, err := c.callTool(ctx, name, args, o, nil)
	var headers map[string]string
	if o != nil {
		headers = o.Headers
	}
	if err != nil {
		var rpc *RPCError
		if errors.As(err, &rpc) {
			if u := c.unserved(asks, rpc); u != nil {
				return nil, c.wrap(callToolOp(name), u, headerValues(headers))
			}
		}
		return nil, err
	}
	out, err := parseCallResult(raw)
	if err != nil {
		return nil, c.wrap(callToolOp(name), err, headerValues(headers))
	}
	if out.IsError {
		if u := c.unserved(asks, nil); u != nil {
			return nil, c.wrap(callToolOp(name), u, headerValues(headers))
		}
	}
	if c.modern {
		out.Meta = withoutServerInfo(out.Meta)
	}
	return out, nil
}

// callTool sends tools/call (task-augmented when task is set) and returns
// the raw result.
func (c *Client) callTool(ctx context.Context, name string, args json.RawMessage, o *CallOptions, task *taskParams) (json.RawMessage, error) {
	if o == nil {
		o = &CallOptions{}
	}
	headers := o.Headers
	// The operation's name and the per-call header values to redact are
	// built only when an error needs them.
	wrap := func(err error) error { return c.wrap(callToolOp(name), err, headerValues(headers)) }
	if c.closed.Load() {
		return nil, wrap(ErrClosed)
	}
	if name == "" {
		return nil, wrap(errors.New("tool name is required"))
	}
	params := callToolParams{Name: name, Task: task}
	if in := o.Input; c.modern && task == nil {
		params.InputResponses, params.RequestState = nonNull(in.InputResponses), in.RequestState
	}
	if a := bytes.TrimSpace(args); len(a) > 0 && string(a) != "null" {
		if !json.Valid(a) {
			return nil, wrap(errors.New("arguments are not valid JSON"))
		}
		params.Arguments = json.RawMessage(a)
	}
	var httpHeaders map[string]string
	if len(headers) > 0 {
		if c.kind == TransportStdio {
			// A stdio server has no HTTP headers: they travel as
			// _meta.headers of tools/call.
			params.Meta = &callToolMeta{Headers: maps.Clone(headers)}
		} else {
			httpHeaders = headers
		}
	}
	x := exchangeFor(o, httpHeaders)
	ctx = withExchange(ctx, x)
	if c.kind == TransportStdio {
		// No HTTP request to carry it: the trace context travels as
		// _meta.traceparent (HTTP upstreams get the header instead).
		if tp := tracing.Traceparent(ctx); tp != "" {
			if params.Meta == nil {
				params.Meta = &callToolMeta{}
			}
			params.Meta.Traceparent = tp
		}
	}
	if fn := o.ServerRequests; fn != nil && !c.modern {
		defer c.askers.add(fn)()
	}
	if fn := o.Progress; fn != nil && task == nil {
		token, remove := c.progress.add(fn)
		defer remove()
		if params.Meta == nil {
			params.Meta = &callToolMeta{}
		}
		params.Meta.ProgressToken = token
	}
	if lc := x.log; lc != nil && task == nil {
		if c.modern {
			if params.Meta == nil {
				params.Meta = &callToolMeta{}
			}
			params.Meta.LogLevel = LogLevels[lc.rank]
		} else {
			c.askLevel(ctx, lc)
		}
	}
	id, raw, err := c.send(ctx, string(mcp.MethodToolsCall), params)
	if err != nil {
		if ctx.Err() != nil && !id.IsNil() {
			c.cancelRequest(id, context.Cause(ctx))
		}
		return nil, c.wrapCtx(ctx, callToolOp(name), err, headerValues(headers))
	}
	return raw, nil
}

// callToolParams are the params of tools/call as mcp-go's client sends them.
type callToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      *callToolMeta   `json:"_meta,omitempty"`
	Task      *taskParams     `json:"task,omitempty"`
	// InputResponses and RequestState are a modern retry's (bridge.go).
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string          `json:"requestState,omitempty"`
}

type callToolMeta struct {
	Headers       map[string]string `json:"headers,omitempty"`
	ProgressToken string            `json:"progressToken,omitempty"`
	Traceparent   string            `json:"traceparent,omitempty"`
	// The per-request protocol fields of 2026-07-28 (modernMeta's, for a
	// modern connection only).
	ProtocolVersion    string              `json:"io.modelcontextprotocol/protocolVersion,omitempty"`
	ClientCapabilities json.RawMessage     `json:"io.modelcontextprotocol/clientCapabilities,omitempty"`
	ClientInfo         *mcp.Implementation `json:"io.modelcontextprotocol/clientInfo,omitempty"`
	// LogLevel asks a modern server for the call's log messages (CallOptions.LogLevel).
	LogLevel string `json:"io.modelcontextprotocol/logLevel,omitempty"`
}

// withProtocolMeta is p with the per-request protocol metadata of
// 2026-07-28 in its _meta, as modernMeta merges it into other params (the
// same fields, without encoding p to merge them).
func (c *Client) withProtocolMeta(p callToolParams, caps json.RawMessage) callToolParams {
	meta := callToolMeta{}
	if p.Meta != nil {
		meta = *p.Meta
	}
	meta.ProtocolVersion, meta.ClientCapabilities = ModernProtocolVersion, json.RawMessage(`{}`)
	if isObject(caps) {
		meta.ClientCapabilities = caps
	}
	if c.clientInfo.Name != "" {
		meta.ClientInfo = &c.clientInfo
	}
	p.Meta = &meta
	return p
}

// cancelRequest tells the server to stop working on request id, whose
// caller has gone. mcp-go's client does so on stdio only; over HTTP the
// aborted POST is not a cancellation the specification names, so the
// notification is sent on every transport. Best effort, off the caller's
// path.
func (c *Client) cancelRequest(id mcp.RequestId, cause error) {
	if c.closed.Load() {
		return
	}
	if c.modern && c.kind != TransportStdio {
		// 2026-07-28 over HTTP has no session to name the request in: the
		// aborted POST (its response stream closed) is the cancellation.
		return
	}
	n := mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": cause.Error()}},
		},
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelNotificationTimeout)
		defer cancel()
		_ = c.mc.GetTransport().SendNotification(ctx, n)
	}()
}

// cancelNotificationTimeout bounds sending one notifications/cancelled.
const cancelNotificationTimeout = 5 * time.Second

// callToolOp names a tools/call in errors.
func callToolOp(name string) string { return "call tool " + strconv.Quote(name) }

// headerValues lists h's values (secrets to keep out of error messages).
func headerValues(h map[string]string) []string {
	var out []string
	for _, v := range h {
		out = append(out, v)
	}
	return out
}

// parseCallResult splits a tools/call result into its parts without
// decoding them. content is required (mcp-go's rule) and each block must
// be a JSON object.
func parseCallResult(raw json.RawMessage) (*CallResult, error) {
	var res struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              json.RawMessage   `json:"_meta"`
		ResultType        string            `json:"resultType"`
		InputRequests     json.RawMessage   `json:"inputRequests"`
		RequestState      string            `json:"requestState"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding tools/call result: %w", err)
	}
	if res.ResultType == string(mcp.ResultTypeInputRequired) {
		in := &InputRequired{InputRequests: nonNull(res.InputRequests), RequestState: res.RequestState}
		if in.InputRequests != nil && in.InputRequests[0] != '{' {
			return nil, errors.New("decoding tools/call result: inputRequests is not a JSON object")
		}
		if in.InputRequests == nil && in.RequestState == "" {
			return nil, errors.New("decoding tools/call result: input_required without inputRequests or requestState")
		}
		return &CallResult{Content: []json.RawMessage{}, Meta: nonNull(res.Meta), InputRequired: in}, nil
	}
	if res.Content == nil {
		return nil, errors.New("decoding tools/call result: content is missing")
	}
	for i, b := range res.Content {
		if len(b) == 0 || b[0] != '{' {
			return nil, fmt.Errorf("decoding tools/call result: content block %d is not a JSON object", i)
		}
	}
	return &CallResult{
		Content:           res.Content,
		StructuredContent: nonNull(res.StructuredContent),
		IsError:           res.IsError,
		Meta:              nonNull(res.Meta),
	}, nil
}

// Close ends the connection. For stdio it closes the child's stdin, gives it
// mcp-go's grace period, then kills the child's whole process group and waits
// until nothing of it is left running. For http it ends the session (DELETE).
// Close is idempotent and safe to call concurrently with other methods, which
// then fail with ErrClosed or a transport error.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		if err := c.shutdown(); err != nil {
			c.closeErr = c.redactor.Error(fmt.Errorf("mcp server %q: close: %w", c.server, err))
		}
	})
	return c.closeErr
}

// shutdown closes the transport and, for stdio, the process group.
func (c *Client) shutdown() error {
	defer c.bg.Wait()
	defer c.cancelLife()
	err := c.mc.Close()
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
	if c.proc == nil {
		return err
	}
	if c.proc.pid() == 0 {
		// Nothing was started; mcp-go complains about pipes exec.Cmd
		// already closed.
		return c.proc.cg.killAndRemove(groupWaitTimeout)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) || errors.Is(err, transport.ErrChildShutdownTimeout) {
		// The child died of a signal (SIGPIPE on stderr while shutting down
		// is common) or ignored SIGTERM: the group kill below settles it.
		err = nil
	}
	err = errors.Join(err, c.proc.terminate())
	c.pipes.release()
	c.stderr.flush()
	return err
}

// Alive reports whether the client can still be used: not closed and, for
// stdio, the child process still running (a crashed child is a zombie or
// gone). Pools call it before reusing a session so a crashed server is
// replaced on the next call instead of failing it.
func (c *Client) Alive() bool {
	if c.closed.Load() {
		return false
	}
	if c.proc == nil {
		return true
	}
	pid := c.proc.pid()
	return pid > 0 && processRunning(pid)
}

// Exited returns a channel closed when the stdio child exits, whether it
// crashed or Close ended it, so an owner can close (and reap) a session
// whose process died while idle instead of leaving a zombie until its next
// call. nil, which never closes, for other transports or where the exit
// cannot be watched (only Linux 5.10+ can).
func (c *Client) Exited() <-chan struct{} { return c.exited }

// Pid returns the stdio child's pid (also its process group id), or 0.
func (c *Client) Pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.pid()
}

// Stderr returns the last bytes (at most 16 KiB) the stdio child wrote to
// stderr, redacted (see Spec.Logger); "" for other transports.
func (c *Client) Stderr() string {
	if c.stderr == nil {
		return ""
	}
	return c.stderr.String()
}
