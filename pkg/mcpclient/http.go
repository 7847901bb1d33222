package mcpclient

import (
	"maps"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// sseTimeout replaces mcp-go's caps on waiting for the SSE endpoint (30 s)
// and for a response (60 s); the callers' ctx deadlines are the real limits.
const sseTimeout = 24 * time.Hour

// maxIdleConnsPerHost is how many idle keep-alive connections the shared
// transport keeps per upstream. net/http's default (2) makes concurrent
// calls to one upstream open and close a TCP connection per call.
const maxIdleConnsPerHost = 256

// sharedTransport carries every session's requests that do not bring their
// own client: one connection pool per process, so sessions of one upstream
// (one per header fingerprint) reuse each other's connections.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * maxIdleConnsPerHost
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	return t
}()

// SharedHTTPClient returns a client on the process-wide upstream transport
// (no overall timeout: the callers' contexts bound each request).
func SharedHTTPClient() *http.Client { return &http.Client{Transport: sharedTransport} }

// httpClient is spec's client (or the shared one) with every response body
// capped at c.limit as it is read and redirects refused unless spec follows
// them (checkRedirect, which keeps the client's own check for each hop).
func (c *Client) httpClient(spec Spec) *http.Client {
	hc := spec.HTTPClient
	if hc == nil {
		hc = SharedHTTPClient()
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *hc
	out.CheckRedirect = checkRedirect(spec, hc.CheckRedirect)
	// Every request carries its call's trace context (traceparent), so the
	// upstream's spans join the caller's trace; nothing while tracing is off.
	out.Transport = tracing.Transport(&limitTransport{base: base, limit: c.limit, tooLarge: c.tooLarge(), onStream: c.streamTripped, logs: &c.logs, gate: c.gate})
	return &out
}

// streamTripped handles a long-lived stream (the legacy SSE stream, which
// carries every response) that crossed the limit: the session is unusable,
// so its transport is closed and the waiting requests fail at once.
func (c *Client) streamTripped() {
	if c.streamTrip.Swap(true) {
		return
	}
	c.logger.Warn("mcp server stream exceeded the response limit; closing the session", "limit_bytes", c.limit)
	go func() { _ = c.mc.GetTransport().Close() }()
}

func (c *Client) newStreamableTransport(spec Spec, era Era) (transport.Interface, error) {
	if (spec.OnListChanged != nil || spec.OnResourceUpdated != nil) && era != EraModern {
		c.gate = &listenGate{done: make(chan struct{})}
	}
	opts := []transport.StreamableHTTPCOption{
		transport.WithHTTPHeaders(maps.Clone(spec.Headers)),
		transport.WithHTTPHeaderFunc(requestHeaders),
		transport.WithHTTPBasicClient(c.httpClient(spec)),
		transport.WithHTTPLogger(c.logger),
	}
	if (spec.OnListChanged != nil || spec.OnResourceUpdated != nil) && era != EraModern {
		// A legacy server's notifications outside a request come on the
		// session's GET stream (a modern one has none: notify.go listens),
		// opened once the server declared a listChanged or, when resource
		// updates are wanted, resources.subscribe (listenGate).
		opts = append(opts, transport.WithContinuousListening())
	}
	return transport.NewStreamableHTTP(spec.URL, opts...)
}

func (c *Client) newSSETransport(spec Spec) (transport.Interface, error) {
	return transport.NewSSE(spec.URL,
		transport.WithHeaders(maps.Clone(spec.Headers)),
		transport.WithHeaderFunc(requestHeaders),
		transport.WithHTTPClient(c.httpClient(spec)),
		transport.WithSSELogger(c.logger),
		transport.WithEndpointTimeout(sseTimeout),
		transport.WithResponseTimeout(sseTimeout),
	)
}
