package mcpclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Era is the generation of the MCP protocol a connection speaks.
type Era string

// Eras.
const (
	// EraLegacy is the initialize handshake (2025-11-25 and older), with a
	// session id over streamable HTTP when the server gives one.
	EraLegacy Era = "legacy"
	// EraModern is the stateless core of 2026-07-28: no initialize, no
	// session id, server/discover, per-request _meta and, over HTTP, the
	// Mcp-Method/Mcp-Name headers.
	EraModern Era = "modern"
)

// ModernProtocolVersion is the protocol version of [EraModern]; the legacy
// era asks for [ProtocolVersion].
const ModernProtocolVersion = mcp.ProtocolVersion20260728

// probeTimeout bounds the server/discover probe (and half of Connect's ctx
// does): a legacy stdio server may ignore the unknown method instead of
// answering MethodNotFound.
const probeTimeout = 5 * time.Second

// maxCachedOrigins bounds an [EraCache] (personal stdio servers are one
// origin per user): when it is full it starts over, and the origins probe
// again.
const maxCachedOrigins = 4096

// EraCache remembers, per origin, the era the last successful Connect
// settled on, so that later connections of a service do not probe again.
// Each service builds its own ([NewEraCache]) and gives it to its
// connections in [Spec.Eras]; it lives in memory only. Safe for
// concurrent use.
type EraCache struct {
	mu sync.Mutex
	m  map[string]Era
	// seeded is the last era Seed offered per origin: the same era
	// offered again is not stored again (a Connect that failed in it
	// forgot it, and the next one probes).
	seeded map[string]Era
}

// NewEraCache returns an empty era cache.
func NewEraCache() *EraCache {
	return &EraCache{m: map[string]Era{}, seeded: map[string]Era{}}
}

// Seed tells the cache what another process (discovery, which probes
// whenever it discovers a server) learnt about spec's origin, so this
// process's first Connect starts in that era: a legacy era skips the
// server/discover probe, a modern one makes the discover the handshake
// (the one request a modern connection sends to start). The same era
// seeded again for the origin is ignored, so a Connect that fails in a
// seeded era (and forgets it) is followed by a probe, not by the same
// seed; a different era (the server was discovered anew) replaces what is
// cached. "" does nothing, and so does a nil cache.
func (o *EraCache) Seed(spec Spec, era Era) {
	if o == nil || (era != EraLegacy && era != EraModern) {
		return
	}
	origin := spec.defaultedOrigin()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seeded[origin] == era {
		return
	}
	if _, ok := o.seeded[origin]; !ok && len(o.seeded) >= maxCachedOrigins {
		clear(o.seeded)
	}
	o.seeded[origin] = era
	o.storeLocked(origin, era)
}

// Cached returns the era the cache last settled on for spec's origin (its
// URL, or its command line and directory), "" when none is known or the
// cache is nil.
func (o *EraCache) Cached(spec Spec) Era {
	if o == nil {
		return ""
	}
	origin := spec.defaultedOrigin()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[origin]
}

func (o *EraCache) store(origin string, era Era) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.storeLocked(origin, era)
}

func (o *EraCache) storeLocked(origin string, era Era) {
	if _, ok := o.m[origin]; !ok && len(o.m) >= maxCachedOrigins {
		clear(o.m)
	}
	o.m[origin] = era
}

func (o *EraCache) forget(origin string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, origin)
}

// defaultedOrigin is origin with the transport's default applied (a spec
// not yet normalized).
func (s Spec) defaultedOrigin() string {
	if s.Transport == "" {
		s.Transport = TransportStdio
	}
	return s.origin()
}

// origin identifies an upstream for the era cache: the URL of an HTTP
// server; the command line, working directory and environment of a stdio
// one (the environment as a SHA-256 of its sorted pairs: two servers that
// differ only in env, such as a flag that selects the era, are two
// origins, and no value is kept). It lives in memory only.
func (s *Spec) origin() string {
	switch s.Transport {
	case TransportStdio:
		return "stdio\x00" + s.Command + "\x00" + strings.Join(s.Args, "\x00") + "\x00" + s.Dir + "\x00" + envDigest(s.Env)
	default:
		return s.Transport + "\x00" + s.URL
	}
}

// envDigest is the hex SHA-256 of env's pairs in key order ("" for none).
func envDigest(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(env[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// probeEra asks the server which protocol versions it supports with a
// server/discover request of 2026-07-28 (over HTTP a modern POST, which a
// legacy server refuses, typically with a 400). The server is modern only
// when it lists 2026-07-28: an SDK shim may answer discover and still
// support only older revisions. Any failure other than ctx ending means
// legacy (nil result). For a modern server the discover is the handshake:
// the HTTP transport keeps sending Mcp-Protocol-Version 2026-07-28.
func (c *Client) probeEra(ctx context.Context, spec Spec) (*mcp.DiscoverResult, error) {
	timeout := probeTimeout
	if dl, ok := ctx.Deadline(); ok {
		// Leave initialize half of the setup time at least, so a legacy
		// server that ignores the unknown method still connects.
		timeout = min(timeout, time.Until(dl)/2)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := c.mc.GetTransport()
	httpConn, _ := tr.(transport.HTTPConnection)
	if httpConn != nil {
		// The Mcp-Protocol-Version header must agree with the _meta.
		httpConn.SetProtocolVersion(ModernProtocolVersion)
	}
	legacy := func(msg string, args ...any) (*mcp.DiscoverResult, error) {
		if httpConn != nil {
			httpConn.SetProtocolVersion("")
		}
		c.logger.Debug(msg, args...)
		return nil, nil
	}
	params := modernMeta(nil, ModernProtocolVersion, mcp.Implementation{Name: spec.ClientName, Version: spec.ClientVersion}, nil)
	var (
		resp *transport.JSONRPCResponse
		err  error
	)
	for attempt := 0; attempt < 2; attempt++ {
		id := "mcpbus-discover"
		if attempt > 0 {
			id += "-retry"
		}
		req := transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId(id),
			Method:  string(mcp.MethodServerDiscover),
			Params:  params,
			Header:  standardHeaders(string(mcp.MethodServerDiscover), params),
		}
		resp, err = tr.SendRequest(pctx, req)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err != nil || !retryableVersionError(resp.Error) {
			break
		}
		// UnsupportedProtocolVersionError naming 2026-07-28 among the
		// versions the server supports: retry once with it, as the
		// version negotiation of 2026-07-28 says (a server may reject a
		// first request, e.g. while rolling out).
		c.logger.Debug("mcp server rejected the protocol version but lists it as supported; retrying server/discover once")
	}
	if errors.Is(err, ErrAuthorizationRequired) {
		// A 401 says nothing about the era: the server wants a (new)
		// token. Reading it as legacy would settle a modern server on
		// initialize, which such a server may let through unauthorized.
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	if err != nil || resp.Error != nil {
		// The error is not logged: it may quote the server's error page
		// (initialize, next, reports the failure if there is one).
		return legacy("mcp server refused server/discover; using the legacy era")
	}
	var res mcp.DiscoverResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return legacy("mcp server sent an unreadable server/discover result; using the legacy era", "error", err)
	}
	if !slices.Contains(res.SupportedVersions, ModernProtocolVersion) {
		return legacy("mcp server does not list the modern protocol version; using the legacy era", "supported_versions", res.SupportedVersions)
	}
	return &res, nil
}

// retryableVersionError reports an UnsupportedProtocolVersionError
// (-32022) whose data.supported lists [ModernProtocolVersion], the one
// version the modern era speaks: the request may be sent again with it.
func retryableVersionError(e *mcp.JSONRPCErrorDetails) bool {
	if e == nil || e.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION || e.Data == nil {
		return false
	}
	b, err := json.Marshal(e.Data)
	if err != nil {
		return false
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	return json.Unmarshal(b, &data) == nil && slices.Contains(data.Supported, ModernProtocolVersion)
}

// handshake settles the connection's era: the legacy era is initialize;
// otherwise the server/discover probe, which is the modern era's
// handshake when it succeeds, and initialize after it when it does not
// (an error if spec asked for the modern era).
func (c *Client) handshake(ctx context.Context, spec Spec, era Era) (*mcp.InitializeResult, error) {
	if era != EraLegacy {
		disc, err := c.probeEra(ctx, spec)
		if err != nil {
			return nil, err
		}
		if disc != nil {
			c.modern = true
			ir := &mcp.InitializeResult{
				ProtocolVersion: ModernProtocolVersion,
				Capabilities:    disc.Capabilities,
				Instructions:    disc.Instructions,
			}
			if info := disc.GetResultMeta().ServerInfo(); info != nil {
				ir.ServerInfo = *info
			}
			return ir, nil
		}
		if spec.Era == EraModern {
			return nil, errors.New("the server does not speak protocol version " + ModernProtocolVersion + " (server/discover failed or did not list it)")
		}
	}
	return c.mc.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: ProtocolVersion,
		ClientInfo:      mcp.Implementation{Name: spec.ClientName, Version: spec.ClientVersion},
	}})
}

// modernMeta returns params (nil or anything that encodes as a JSON
// object) with the per-request protocol metadata of 2026-07-28 merged into
// its _meta: the protocol version, the client's identity and capabilities
// (caps, an MCP ClientCapabilities object; nil for none).
func modernMeta(params any, version string, info mcp.Implementation, caps json.RawMessage) map[string]json.RawMessage {
	fields := map[string]json.RawMessage{}
	if params != nil {
		b, err := json.Marshal(params)
		if err == nil {
			_ = json.Unmarshal(b, &fields)
		}
	}
	meta := map[string]any{}
	if raw, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[mcp.MetaKeyProtocolVersion] = version
	if isObject(caps) {
		meta[mcp.MetaKeyClientCapabilities] = caps
	} else {
		meta[mcp.MetaKeyClientCapabilities] = mcp.ClientCapabilities{}
	}
	if info.Name != "" {
		meta[mcp.MetaKeyClientInfo] = info
	}
	b, err := json.Marshal(meta)
	if err == nil {
		fields["_meta"] = b
	}
	return fields
}

// isObject reports whether caps is a JSON object: the client capabilities
// a caller gave, which replace the default {} in a modern request's _meta.
func isObject(caps json.RawMessage) bool {
	return len(caps) > 0 && caps[0] == '{' && json.Valid(caps)
}

// standardHeaders are the Mcp-Method and Mcp-Name headers 2026-07-28
// requires on streamable HTTP requests (other transports ignore them).
func standardHeaders(method string, params any) http.Header {
	b, err := json.Marshal(params)
	if err != nil {
		return nil
	}
	h := http.Header{}
	for k, v := range mcp.StandardHeaders(ModernProtocolVersion, mcp.MCPMethod(method), b) {
		h.Set(k, v)
	}
	if id, ok := taskHeaderName(method, b); ok {
		h.Set(mcp.HeaderName, id)
	}
	return h
}

// errModernNeedsHTTP explains why the SSE transport cannot be modern.
var errModernNeedsHTTP = errors.New("the modern era (2026-07-28) needs the stdio or streamable http transport")

// resolveEra is the era Connect starts with: spec's, else the cached one
// (unless Reprobe), else "" (probe). Only a legacy era skips the probe: the
// modern era's handshake is the probe.
func (s *Spec) resolveEra() (Era, error) {
	switch s.Era {
	case "", EraLegacy, EraModern:
	default:
		return "", fmt.Errorf("unknown era %q (want legacy or modern)", s.Era)
	}
	if s.Transport == TransportSSE {
		if s.Era == EraModern {
			return "", errModernNeedsHTTP
		}
		return EraLegacy, nil
	}
	if s.Era != "" {
		return s.Era, nil
	}
	if s.Reprobe {
		return "", nil
	}
	return s.Eras.Cached(*s), nil
}

// serverInfoOnly is how a _meta holding nothing but the serverInfo begins.
var serverInfoOnly = []byte(`{"` + mcp.MetaKeyServerInfo + `":`)

// onlyServerInfo reports a compact _meta whose one key is the serverInfo
// (what a 2026-07-28 server's results carry), without decoding it into a
// map: what follows the key up to the closing brace is one JSON value.
func onlyServerInfo(meta json.RawMessage) bool {
	return len(meta) > len(serverInfoOnly)+1 && bytes.HasPrefix(meta, serverInfoOnly) && meta[len(meta)-1] == '}' &&
		json.Valid(meta[len(serverInfoOnly):len(meta)-1])
}

// withoutServerInfo drops the serverInfo a 2026-07-28 server puts in every
// result's _meta (protocol metadata, not the tool's), so a result reads the
// same in both eras; nil when nothing else is left.
func withoutServerInfo(meta json.RawMessage) json.RawMessage {
	if meta == nil || !bytes.Contains(meta, []byte(mcp.MetaKeyServerInfo)) {
		return meta
	}
	if onlyServerInfo(meta) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return meta
	}
	delete(m, mcp.MetaKeyServerInfo)
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return meta
	}
	return b
}
