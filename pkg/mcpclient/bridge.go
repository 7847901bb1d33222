package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Bridging a downstream MCP client's side of a call (the capabilities it
// declared, its answers to a multi-round-trip result) to the upstream, and
// the upstream's requests for input back.

// CallInput is what a call carries from the MCP client it is made for
// (WithCallInput).
type CallInput struct {
	// Capabilities is an MCP ClientCapabilities object: the modern era's
	// _meta clientCapabilities of the call (nil sends {}). The legacy era
	// declares capabilities once per session, at initialize, and mcpbus
	// declares none there, so it is not sent.
	Capabilities json.RawMessage
	// InputResponses (a JSON object) and RequestState are the retry of a
	// call answered with InputRequired (2026-07-28 multi round-trip
	// requests): sent as the call's inputResponses and requestState, in the
	// modern era only.
	InputResponses json.RawMessage
	RequestState   string
}

type callInputKey struct{}

// WithCallInput returns ctx carrying in for the CallTool calls made with it.
func WithCallInput(ctx context.Context, in CallInput) context.Context {
	return context.WithValue(ctx, callInputKey{}, in)
}

func callInputFrom(ctx context.Context) CallInput {
	in, _ := ctx.Value(callInputKey{}).(CallInput)
	return in
}

// InputRequired is a 2026-07-28 server's multi-round-trip answer to a call
// (resultType "input_required"): the requests the client must fulfil
// (inputRequests, as sent) and the opaque state to echo back.
type InputRequired struct {
	InputRequests json.RawMessage
	RequestState  string
}

// UnservedRequestError is a call that failed after the server sent a
// request to the client (elicitation/create, sampling/createMessage,
// roots/list; legacy-era servers), which mcpbus does not relay: it
// answered the request with an error, and the call then failed.
type UnservedRequestError struct {
	// Method is the server's request method.
	Method string
	// Cause is how the call failed (an *RPCError, or nil for a result
	// with isError).
	Cause error
}

func (e *UnservedRequestError) Error() string {
	msg := "the server asked the client for " + strconv.Quote(e.Method) + ", which mcpbus does not relay from a server of the legacy MCP era, and the call failed"
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *UnservedRequestError) Unwrap() error { return e.Cause }

// Capability is the client capability Method needs ("elicitation",
// "sampling", "roots"; "" for another method).
func (e *UnservedRequestError) Capability() string { return bus.CapabilityOf(e.Method) }

// serverRequest answers a request the server sends the client: ping is
// answered; anything else (elicitation, sampling, roots: mcpbus declares
// none of them) is refused with method not found and remembered, so a call
// that then fails says why (UnservedRequestError).
func (c *Client) serverRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodPing) {
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	}
	c.asked.Store(&req.Method)
	c.asks.Add(1)
	c.logger.Info("mcp server sent a request to the client, which mcpbus does not relay; refused", "method", req.Method)
	return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND,
		fmt.Sprintf("mcpbus does not relay %s requests from a server to its clients", req.Method), nil), nil
}

// unserved is a call's JSON-RPC error (nil: a result with isError) as an
// UnservedRequestError when the server sent a request to the client since
// the call's asks count was before; nil otherwise.
func (c *Client) unserved(before uint64, err error) error {
	if c.asks.Load() == before {
		return nil
	}
	method := ""
	if m := c.asked.Load(); m != nil {
		method = *m
	}
	return &UnservedRequestError{Method: method, Cause: err}
}

// CodeMissingRequiredClientCapability is 2026-07-28's JSON-RPC error for
// a request that needs a client capability the request did not declare.
const CodeMissingRequiredClientCapability = mcp.MISSING_REQUIRED_CLIENT_CAPABILITY

// MissingCapabilityError is a server's -32021 answer: Required is its
// data.requiredCapabilities (or {capability: {}} from mcp-go's
// data.capability), empty when it named none.
type MissingCapabilityError struct {
	Required map[string]any
	rpc      *RPCError
}

func (e *MissingCapabilityError) Error() string { return e.rpc.Error() }
func (e *MissingCapabilityError) Unwrap() error { return e.rpc }

// Message is the server's error message.
func (e *MissingCapabilityError) Message() string { return e.rpc.Message }

// maxRequiredBytes bounds the requiredCapabilities kept from a server.
const maxRequiredBytes = 4096

// missingCapability reads the required capabilities from a -32021 error's
// data (anything unreadable or too large is left out).
func missingCapability(rpc *RPCError, data any) *MissingCapabilityError {
	e := &MissingCapabilityError{Required: map[string]any{}, rpc: rpc}
	b, err := json.Marshal(data)
	if err != nil || len(b) > maxRequiredBytes {
		return e
	}
	var d struct {
		RequiredCapabilities map[string]json.RawMessage `json:"requiredCapabilities"`
		Capability           string                     `json:"capability"`
	}
	if json.Unmarshal(b, &d) != nil {
		return e
	}
	for k, v := range d.RequiredCapabilities {
		var obj map[string]any
		if json.Unmarshal(v, &obj) != nil || obj == nil {
			obj = map[string]any{}
		}
		e.Required[k] = obj
	}
	if d.Capability != "" && len(e.Required) == 0 {
		e.Required[d.Capability] = map[string]any{}
	}
	return e
}
