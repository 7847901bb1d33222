package mcpclient

import (
	"context"
	"encoding/json"
	"maps"
)

// CallOptions is everything one tools/call carries besides the tool's name
// and arguments. It is an explicit parameter of the call: the Client reads
// no call data from the caller's context (which carries only cancellation,
// the deadline and the trace).
type CallOptions struct {
	// Headers are HTTP headers of this request only (for stdio: sent as
	// _meta.headers), checked where they were assembled.
	Headers map[string]string
	// InputSchema is the tool's inputSchema as its server listed it: on a
	// 2026-07-28 connection over streamable HTTP the arguments it
	// annotates with x-mcp-header are mirrored into Mcp-Param-* headers
	// (paramheaders.go); elsewhere it changes nothing.
	InputSchema json.RawMessage
	// Input is what the call carries from the MCP client it is made for
	// (bridge.go): capabilities and a retry's answers.
	Input CallInput
	// Progress, when set, asks the server for progress (a progressToken
	// of the client's own in _meta) and receives every
	// notifications/progress of the call until it returns.
	Progress ProgressFunc
	// LogLevel (one of LogLevels; any other asks for nothing) and Log ask
	// the server for the call's log messages at that level and above and
	// receive each of them until the call returns (notify.go).
	LogLevel string
	Log      LogFunc
	// Owner is the user the call is made for: a log message read off one
	// owner's response stream is delivered only while no other owner's
	// request is in flight on the connection.
	Owner string
	// ServerRequests receives the server's requests to the client (legacy
	// era) while the call runs, when it is the one such call in flight on
	// the connection (a request does not say which call it belongs to);
	// nil refuses them.
	ServerRequests ServerRequestFunc
}

// exchange is what the Client's own hooks inside mcp-go's transports (the
// HTTP header func, the response limiter, the log router) need of the one
// request they serve. mcp-go hands those hooks only the request's context,
// so send puts the exchange there, under the package's one private key;
// it is built from explicit parameters, never read from a caller's context.
type exchange struct {
	headers map[string]string
	caps    json.RawMessage
	schema  json.RawMessage
	owner   string
	log     *logCall
	// trip is set when the response crosses the size limit (limit.go);
	// send clears it before each request (an exchange serves its
	// requests one after another).
	trip tripFlag
}

type exchangeKey struct{}

// noExchange is what a request without an exchange of its own reads
// (the connection's listening stream); never written.
var noExchange = &exchange{}

// withExchange returns ctx carrying x for the transport hooks.
func withExchange(ctx context.Context, x *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// exchangeOf is the exchange ctx carries, never nil.
func exchangeOf(ctx context.Context) *exchange {
	if x, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		return x
	}
	return noExchange
}

// exchangeFor is the exchange of a request with options o and per-request
// HTTP headers h (nil for stdio, whose headers travel in _meta).
func exchangeFor(o *CallOptions, h map[string]string) *exchange {
	x := &exchange{headers: maps.Clone(h)}
	if o != nil {
		x.caps, x.schema, x.owner = o.Input.Capabilities, o.InputSchema, o.Owner
		x.log = newLogCall(o.LogLevel, o.Log)
	}
	return x
}

// requestHeaders is the transports' header func. mcp-go applies its result
// with Header.Set after the static headers, so a per-request header replaces
// a static one of the same name regardless of case.
func requestHeaders(ctx context.Context) map[string]string {
	return exchangeOf(ctx).headers
}
