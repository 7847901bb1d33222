package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// Bridging between MCP eras (bus/bridge.go). A public call's client
// capabilities and multi-round-trip answers are fields of its bus.Call,
// which the upcall carries to the invoke step (and a hand-over forwards):
// it gives them to the upstream call (mcpclient.CallOptions.Input) and
// stores a modern upstream's input_required answer in the upcall, as
// native tasks do in their nativeOp.
//
// Refusals with bus.CodeClientCapabilityMissing naming the server:
//   - a modern upstream's input_required asking for a capability the
//     client did not declare (the upstream must not; mcpbus checks);
//   - a modern upstream's own -32021 answer;
//   - a legacy upstream that sent the client a request (elicitation,
//     sampling, roots), which mcpbus refuses, after which the call failed.

// withAsker hands the server-to-client requests a legacy upstream makes
// during the call to the caller's ask inbox (bus.AskRequest, answered
// with bus.AskReply by the api replica holding the client's stream)
// instead of refusing them; ctx is the call's (the wait ends with it).
// An inbox its caller could not receive on (bus.CheckInbox: on a
// per-user subject, userBound, one under the user's own inbox prefix) is
// invalid_request.
func (s *Service) withAsker(ctx context.Context, u *upcall) error {
	inbox := u.call.AskInbox
	if inbox == "" {
		return nil
	}
	if err := bus.CheckInbox("ask_inbox", inbox, s.deps.Names.AskInboxPrefix(), u.call.UserID, u.userBound); err != nil {
		return err
	}
	callCtx := ctx
	u.opts.ServerRequests = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		reply, err := bus.Request[bus.AskReply](callCtx, s.deps.NC, inbox, bus.AskRequest{Method: method, Params: params})
		if err != nil {
			return nil, mcpclient.NewRPCError(-32603, "mcpbus could not ask the client: "+bus.AsError(err).Message)
		}
		if reply.Error != nil {
			return nil, mcpclient.NewRPCError(reply.Error.Code, reply.Error.Message)
		}
		return reply.Result, nil
	}
	return nil
}

// admitBridge is the admission of a call's bridging fields.
func admitBridge(req bus.Call) error {
	if err := req.ClientCapabilities.Validate(); err != nil {
		return err
	}
	return req.Input.Validate()
}

// callInput is what the upstream call gets from c.
func callInput(c bus.Call) mcpclient.CallInput {
	in := mcpclient.CallInput{}
	if c.ClientCapabilities != nil {
		in.Capabilities = c.ClientCapabilities.JSON()
	}
	if c.Input != nil {
		in.InputResponses, in.RequestState = c.Input.InputResponses, c.Input.RequestState
	}
	return in
}

// bridgeAnswer checks the upstream's answer to u's call (bridged: the
// caller has an MCP client, and the call was given its input, callInput):
// an input_required result is stored in u (a capability the client did
// not declare is refused), and the bridging failures become
// client_capability_missing; anything else is err unchanged.
func bridgeAnswer(u *upcall, server string, bridged bool, res *mcpclient.CallResult, err error) error {
	if err != nil {
		return capabilityError(server, err)
	}
	ir := res.InputRequired
	if ir == nil {
		return nil
	}
	if len(ir.InputRequests) > bus.MaxInputResponsesBytes || len(ir.RequestState) > bus.MaxRequestStateBytes {
		return bus.Errorf(bus.CodeUpstreamError, "MCP server '%s' asked for input with a request larger than mcpbus relays", server)
	}
	if missing := missingFor(ir.InputRequests, u.call.ClientCapabilities); len(missing) > 0 {
		return bus.MissingCapability(server, missing, fmt.Sprintf(
			"MCP server '%s' needs the client capabilities %s to complete this call (it asked for input the client did not declare it can give)", server, capNames(missing)))
	}
	if !bridged {
		// A caller without an MCP client (NATS, REST) cannot answer.
		return bus.MissingCapability(server, map[string]any{}, fmt.Sprintf(
			"MCP server '%s' asked for more input (a multi-round-trip result), which only an MCP client can answer", server))
	}
	u.required = &bus.InputRequired{InputRequests: ir.InputRequests, RequestState: ir.RequestState}
	return nil
}

// missingFor is the requiredCapabilities object of the input requests
// (a JSON object of {method, params}) caps does not declare.
func missingFor(requests []byte, caps *bus.ClientCapabilities) map[string]any {
	methods := inputMethods(requests)
	out := map[string]any{}
	for _, m := range methods {
		c := bus.CapabilityOf(m)
		if c == "" {
			// An unknown request kind: no capability serves it.
			c = "unknown request " + strconv.Quote(m)
		}
		if !caps.Has(c) {
			out[c] = map[string]any{}
		}
	}
	return out
}

// capabilityError maps an upstream failure that a missing client
// capability caused to client_capability_missing naming server; other
// errors are returned unchanged.
func capabilityError(server string, err error) error {
	var u *mcpclient.UnservedRequestError
	if errors.As(err, &u) {
		c := u.Capability()
		required := map[string]any{}
		if c != "" {
			required[c] = map[string]any{}
		}
		return bus.MissingCapability(server, required, fmt.Sprintf(
			"MCP server '%s' (legacy MCP era) asked the client for %s during the call, which mcpbus does not relay from a legacy server; the call could not complete", server, u.Method))
	}
	var mc *mcpclient.MissingCapabilityError
	if errors.As(err, &mc) {
		return bus.MissingCapability(server, mc.Required, fmt.Sprintf(
			"MCP server '%s' needs a client capability this client did not declare: %s", server, mc.Message()))
	}
	return err
}

// inputMethods is the method of each input request (a JSON object keyed
// by the server's ids; unreadable entries are "").
func inputMethods(requests []byte) []string {
	if len(requests) == 0 {
		return nil
	}
	var m map[string]struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(requests, &m) != nil {
		return []string{""}
	}
	out := make([]string, 0, len(m))
	for _, r := range m {
		out = append(out, r.Method)
	}
	return out
}

// capNames lists the capability names of required, sorted.
func capNames(required map[string]any) string {
	return strings.Join(slices.Sorted(maps.Keys(required)), ", ")
}
