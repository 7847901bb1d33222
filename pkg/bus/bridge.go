package bus

import (
	"bytes"
	"encoding/json"
)

// Bridging between MCP eras (what a tools/call carries about the MCP client
// that made it, and what a 2026-07-28 upstream may answer instead of a
// result).
//
// Call.ClientCapabilities is the part of the downstream MCP
// client's capabilities an upstream server acts on during a call:
// elicitation, sampling and roots, each the client's own JSON object (e.g.
// {"form":{}} for elicitation), at most MaxCapabilityBytes each; every other
// capability (experimental, extensions, tasks) is not carried. nil means the
// caller said nothing (NATS agents, REST): mcpbus then declares none upstream,
// as it always did. The api fills it from the legacy session's initialize
// capabilities or from a 2026-07-28 request's _meta clientCapabilities.
//
// A 2026-07-28 upstream may answer a call with a multi-round-trip result
// (resultType "input_required"): the reply then carries InputRequired
// (inputRequests and requestState, as the upstream sent them) and no
// content. The client answers by calling again with
// Call.Input (inputResponses and the requestState echoed back),
// which toolcall forwards to the upstream on that call.
//
// When a call cannot go on because the downstream client lacks a
// capability (an upstream's input request the client did not declare, an
// upstream's own -32021, a legacy upstream's server-to-client request that
// mcpbus does not relay), the call fails with
// CodeClientCapabilityMissing; Details["server"] names the server and
// Details["required_capabilities"] is the MCP requiredCapabilities object
// (e.g. {"elicitation":{}}).

// Size limits of the bridging fields (caller-controlled data forwarded
// upstream).
const (
	// MaxCapabilityBytes bounds one capability object.
	MaxCapabilityBytes = 1024
	// MaxInputResponsesBytes bounds Input.InputResponses and
	// InputRequired.InputRequests.
	MaxInputResponsesBytes = 256 << 10
	// MaxRequestStateBytes bounds a requestState.
	MaxRequestStateBytes = 64 << 10
)

// CodeClientCapabilityMissing: the call needs a capability the caller's MCP
// client did not declare, or one mcpbus cannot bridge (MCP -32021).
const CodeClientCapabilityMissing Code = "client_capability_missing"

// ClientCapabilities is the downstream MCP client's capabilities an
// upstream may act on during a call; a nil field is not declared.
type ClientCapabilities struct {
	Elicitation json.RawMessage `json:"elicitation,omitempty"`
	Sampling    json.RawMessage `json:"sampling,omitempty"`
	Roots       json.RawMessage `json:"roots,omitempty"`
}

// CapabilitiesOf is the compact set of an MCP ClientCapabilities object
// (nil for none, or for a value that is not an object); a declared
// capability that is not a JSON object of at most MaxCapabilityBytes is
// dropped (treated as not declared).
func CapabilitiesOf(raw json.RawMessage) *ClientCapabilities {
	var all ClientCapabilities
	if len(raw) == 0 || json.Unmarshal(raw, &all) != nil {
		return nil
	}
	return &ClientCapabilities{Elicitation: capObject(all.Elicitation), Sampling: capObject(all.Sampling), Roots: capObject(all.Roots)}
}

// OversizedCapability returns the name of the first capability of the MCP
// ClientCapabilities object raw that CapabilitiesOf would keep but for its
// size (larger than MaxCapabilityBytes), or "".
func OversizedCapability(raw json.RawMessage) string {
	var all ClientCapabilities
	if len(raw) == 0 || json.Unmarshal(raw, &all) != nil {
		return ""
	}
	for _, f := range all.fields() {
		if len(f.v) > MaxCapabilityBytes {
			return f.name
		}
	}
	return ""
}

// capObject is v compacted when it is a JSON object within the limit.
func capObject(v json.RawMessage) json.RawMessage {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '{' || len(v) > MaxCapabilityBytes {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return nil
	}
	return b.Bytes()
}

// capField is one capability of ClientCapabilities by its MCP name.
type capField struct {
	name string
	v    json.RawMessage
}

// fields are c's capabilities in a fixed order.
func (c *ClientCapabilities) fields() []capField {
	return []capField{{"elicitation", c.Elicitation}, {"sampling", c.Sampling}, {"roots", c.Roots}}
}

// Validate refuses capabilities that are not JSON objects within the
// limit (invalid_request, naming the field).
func (c *ClientCapabilities) Validate() error {
	if c == nil {
		return nil
	}
	for _, f := range c.fields() {
		name, v := f.name, f.v
		if len(v) == 0 {
			continue
		}
		if len(v) > MaxCapabilityBytes {
			return Errorf(CodeInvalidRequest, "client_capabilities.%s is larger than %d bytes", name, MaxCapabilityBytes)
		}
		if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
			return Errorf(CodeInvalidRequest, "client_capabilities.%s must be a JSON object", name)
		}
	}
	return nil
}

// Has reports whether the capability named by an MCP capability key
// ("elicitation", "sampling", "roots") is declared.
func (c *ClientCapabilities) Has(name string) bool {
	if c == nil {
		return false
	}
	switch name {
	case "elicitation":
		return c.Elicitation != nil
	case "sampling":
		return c.Sampling != nil
	case "roots":
		return c.Roots != nil
	}
	return false
}

// JSON is the capabilities as an MCP ClientCapabilities object ({} for
// none).
func (c *ClientCapabilities) JSON() json.RawMessage {
	if c == nil {
		return json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(c)
	return b
}

// CallInput is a client's retry of a call answered with InputRequired:
// its answers (MCP inputResponses, a JSON object) and the requestState
// echoed back unchanged.
type CallInput struct {
	InputResponses json.RawMessage `json:"input_responses,omitempty"`
	RequestState   string          `json:"request_state,omitempty"`
}

// Validate refuses input that is not an object or exceeds the limits.
func (in *CallInput) Validate() error {
	if in == nil {
		return nil
	}
	if len(in.RequestState) > MaxRequestStateBytes {
		return Errorf(CodeInvalidRequest, "input.request_state is larger than %d bytes", MaxRequestStateBytes)
	}
	if len(in.InputResponses) == 0 {
		return nil
	}
	if len(in.InputResponses) > MaxInputResponsesBytes {
		return Errorf(CodeInvalidRequest, "input.input_responses is larger than %d bytes", MaxInputResponsesBytes)
	}
	if t := bytes.TrimSpace(in.InputResponses); len(t) == 0 || (t[0] != '{' && string(t) != "null") || !json.Valid(t) {
		return Errorf(CodeInvalidRequest, "input.input_responses must be a JSON object")
	}
	return nil
}

// InputRequired is an upstream's multi-round-trip answer (MCP
// InputRequiredResult): the requests the client must fulfil (MCP
// inputRequests, a JSON object keyed by the server's ids) and the opaque
// state to echo back; at least one is set.
type InputRequired struct {
	InputRequests json.RawMessage `json:"input_requests,omitempty"`
	RequestState  string          `json:"request_state,omitempty"`
}

// MissingCapability is the CodeClientCapabilityMissing error for server's
// need (required, an MCP requiredCapabilities object such as
// {"elicitation":{}}), with msg saying what needed it.
func MissingCapability(server string, required map[string]any, msg string) *Error {
	return &Error{Code: CodeClientCapabilityMissing, Message: msg,
		Details: map[string]any{"server": server, "required_capabilities": required}}
}

// CapabilityOf is the client capability an MCP server-to-client request
// method needs ("elicitation", "sampling", "roots"; "" for any other).
func CapabilityOf(method string) string {
	switch method {
	case "elicitation/create":
		return "elicitation"
	case "sampling/createMessage":
		return "sampling"
	case "roots/list":
		return "roots"
	}
	return ""
}

// MCPClientAnswer is the subject where an api replica publishes a legacy
// MCP client's answer (a JSON-RPC response) to the request with token id
// that mcpbus sent it in the session whose hashed id is session; the call
// that asked waits on it (mcpserver, ask.go). Both are hex tokens.
func (n Names) MCPClientAnswer(session, id string) string {
	return n.subject("mcpbus.mcp.answer." + session + "." + id)
}

// AskInboxPrefix starts every ask inbox of the deployment ("mcpbus.ask.",
// namespaced), followed by a random token. An MCP client that mcpbus can
// ask for input (a legacy session with a stream back to it) has its api
// replica subscribe one for the call and name it in
// Call.AskInbox; toolcall sends a legacy upstream's
// server-to-client requests made during the call there (a request, body
// AskRequest, reply AskReply) instead of refusing them.
func (n Names) AskInboxPrefix() string { return n.subject("mcpbus.ask.") }

// NewAskInbox returns a fresh ask inbox subject.
func (n Names) NewAskInbox() string { return newInbox(n.AskInboxPrefix()) }

// AskRequest is an upstream's server-to-client request (elicitation/create,
// sampling/createMessage, roots/list) for the caller's client.
type AskRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// AskReply is the client's answer: its JSON-RPC result, or the error to
// answer the upstream with.
type AskReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}
