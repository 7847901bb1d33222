package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Bridging a downstream MCP client's side of a call (the capabilities it
// declared, its answers to a multi-round-trip result) to the upstream, and
// the upstream's requests for input back.

// CallInput is what a call carries from the MCP client it is made for
// (CallOptions.Input).
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

// ServerRequestFunc answers a request the server sent the client during a
// call (method and params as sent): its result, or an *RPCError to answer
// with (any other error answers -32603).
type ServerRequestFunc func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

// askers are the calls in flight that can answer server requests.
type askers struct {
	mu  sync.Mutex
	seq uint64
	fns map[uint64]ServerRequestFunc
}

// add registers fn; remove unregisters it.
func (a *askers) add(fn ServerRequestFunc) (remove func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	id := a.seq
	if a.fns == nil {
		a.fns = map[uint64]ServerRequestFunc{}
	}
	a.fns[id] = fn
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.fns, id)
	}
}

// only is the one registered fn, nil when there are none or several.
func (a *askers) only() ServerRequestFunc {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.fns) != 1 {
		return nil
	}
	for _, fn := range a.fns {
		return fn
	}
	return nil
}

// serverRequest answers a request the server sends the client: ping is
// answered; anything else (elicitation, sampling, roots) goes to the one
// call in flight that can answer it (CallOptions.ServerRequests), or is refused
// with method not found and remembered, so a call that then fails says
// why (UnservedRequestError).
func (c *Client) serverRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodPing) {
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	}
	if fn := c.askers.only(); fn != nil {
		params, _ := json.Marshal(req.Params)
		if string(params) == "null" {
			params = nil
		}
		res, err := fn(ctx, req.Method, params)
		if err != nil {
			code, msg := mcp.INTERNAL_ERROR, err.Error()
			var rpc *RPCError
			if errors.As(err, &rpc) {
				code, msg = rpc.Code, rpc.Message
			}
			return transport.NewJSONRPCErrorResponse(req.ID, code, msg, nil), nil
		}
		return transport.NewJSONRPCResultResponse(req.ID, res), nil
	}
	c.asked.Store(&req.Method)
	c.asks.Add(1)
	c.logger.Info("mcp server sent a request to the client, which mcpbus does not relay; refused", "method", req.Method)
	return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND,
		fmt.Sprintf("mcpbus does not relay %s requests from a server to its clients", req.Method), nil), nil
}

// NewRPCError is a JSON-RPC error for a ServerRequestFunc to return.
func NewRPCError(code int, message string) *RPCError {
	return &RPCError{Code: code, Message: message, err: errors.New(message)}
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
