package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Bridging a call between the client's era and the upstream's (bus
// bridge.go has the contract).
//
// What travels on the bus as ToolsCallRequest.ClientCapabilities is what
// the call can use: for a modern request its _meta clientCapabilities
// (elicitation, sampling, roots); for a legacy session none of them, since
// mcpbus does not relay a server's requests to a legacy client (a server
// that can do without them then does; the session keeps what initialize
// declared). A modern upstream's input_required answer is relayed to a
// modern client as its own input_required result, and the client's retry
// (inputResponses, requestState) travels as ToolsCallRequest.Input; a
// legacy client gets -32021 naming the server instead, except for one
// without input requests (only a requestState, which a client may send
// back at once: load shedding), which mcpbus retries for it up to
// legacyRetries times. A call that needs a
// capability the client lacks is -32021 (MissingCapability) in both eras,
// its message naming the server.

// requestState is attacker-controlled input to the upstream (the spec
// makes the server bind it to the principal), and every caller reaches
// an upstream with mcpbus's credentials: with Deps.StateSealer the state
// a client sees is sealed (AES-256-GCM under the credentials key, every
// api replica holds it) with the caller and tool as additional data, and
// a retry's state must open for the same caller and tool, or the call is
// invalid params.

// sealedStatePrefix marks a requestState mcpbus sealed.
const sealedStatePrefix = "mcpbus1."

// stateAD binds a sealed requestState to the caller and the tool.
func stateAD(user, tool string) []byte {
	return []byte("mcpbus-request-state\x00" + user + "\x00" + tool)
}

// sealState is the requestState the client gets (unchanged without a
// sealer).
func (s *Server) sealState(x *Exchange, tool, state string) (string, *Error) {
	if s.deps.StateSealer == nil || state == "" {
		return state, nil
	}
	b, err := s.deps.StateSealer.Seal([]byte(state), stateAD(x.UserID, tool))
	if err != nil {
		return "", Errorf(CodeInternalError, "tools/call: cannot seal the request state")
	}
	return sealedStatePrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// openState is a retry's requestState as the upstream issued it.
func (s *Server) openState(x *Exchange, tool, state string) (string, *Error) {
	if s.deps.StateSealer == nil || state == "" {
		return state, nil
	}
	refused := Errorf(CodeInvalidParams, "tools/call params: requestState was not issued by mcpbus for this caller and tool %q; call the tool again without it", tool)
	raw, ok := strings.CutPrefix(state, sealedStatePrefix)
	if !ok || len(raw) > 2*bus.MaxRequestStateBytes {
		return "", refused
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return "", refused
	}
	plain, err := s.deps.StateSealer.Open(b, stateAD(x.UserID, tool))
	if err != nil {
		return "", refused
	}
	return string(plain), nil
}

// bridgeCall fills req's bridging fields for the caller's era.
func (s *Server) bridgeCall(x *Exchange, p *callParams, req *bus.ToolsCallRequest) *Error {
	req.ClientCapabilities = &bus.ClientCapabilities{}
	if x.Session != nil {
		return nil
	}
	if caps := bus.CapabilitiesOf(p.Meta.ClientCapabilities); caps != nil {
		req.ClientCapabilities = caps
	}
	if len(p.InputResponses) == 0 && p.RequestState == "" {
		return nil
	}
	state, rerr := s.openState(x, p.Name, p.RequestState)
	if rerr != nil {
		return rerr
	}
	in := &bus.CallInput{RequestState: state}
	if string(p.InputResponses) != "null" {
		in.InputResponses = p.InputResponses
	}
	if err := in.Validate(); err != nil {
		return Errorf(CodeInvalidParams, "tools/call params: %s", bus.AsError(err).Message)
	}
	req.Input = in
	return nil
}

// legacyBridgeNote ends a legacy client's -32021 message.
const legacyBridgeNote = " (mcpbus relays a server's requests for input to MCP " + Version20260728 + " clients only)"

// capabilityError is a client_capability_missing refusal as -32021, nil
// for any other error.
func capabilityError(x *Exchange, err error) *Error {
	e := bus.AsError(err)
	if e.Code != bus.CodeClientCapabilityMissing {
		return nil
	}
	required, _ := e.Details["required_capabilities"].(map[string]any)
	if required == nil {
		required = map[string]any{}
	}
	msg := e.Message
	if x.Session != nil {
		msg += legacyBridgeNote
	}
	return MissingCapability(required, msg)
}

// legacyRetries bounds how often mcpbus retries an upstream's
// input_required without input requests for a legacy client.
const legacyRetries = 3

// retryForLegacy reports whether reply is an input_required without input
// requests (only a requestState: the spec's "retry the original request",
// load shedding) that mcpbus retries itself for a legacy client, which
// cannot (the n-th retry so far).
func retryForLegacy(x *Exchange, reply bus.ToolsCallReply, n int) bool {
	ir := reply.InputRequired
	return x.Session != nil && ir != nil && len(ir.InputRequests) == 0 && n < legacyRetries
}

// inputRequired answers an upstream's input_required: relayed to a modern
// client, -32021 for a legacy one.
func (s *Server) inputRequired(x *Exchange, tool string, reply bus.ToolsCallReply) (any, *Error) {
	if x.Session != nil {
		if len(reply.InputRequired.InputRequests) == 0 {
			return nil, Errorf(CodeInternalError, "tools/call: MCP server '%s' asked to be called again %d times (busy); retry later", reply.Server, legacyRetries+1)
		}
		return nil, MissingCapability(map[string]any{}, "MCP server '"+reply.Server+"' answered with a request for more input (a multi-round-trip result)"+legacyBridgeNote)
	}
	ir := *reply.InputRequired
	var rerr *Error
	if ir.RequestState, rerr = s.sealState(x, tool, ir.RequestState); rerr != nil {
		return nil, rerr
	}
	return callResult{Content: []json.RawMessage{}, Meta: reply.Meta, InputRequired: &ir}, nil
}
