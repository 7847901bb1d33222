package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Bridging a call between the client's era and the upstream's (bus
// bridge.go has the contract).
//
// What travels on the bus as bus.Call.ClientCapabilities is what
// the call can use: for a modern request its _meta clientCapabilities
// (elicitation, sampling, roots); for a legacy session the ones its
// initialize declared when the request has a stream back to the client
// (mcpbus can then ask it, ask.go), else none. A modern upstream's
// input_required is relayed to a modern client as its own input_required
// result, and the client's retry (inputResponses, requestState) travels
// as bus.Call.Input. For a legacy client mcpbus makes the rounds
// itself: load shedding (a requestState alone) is retried at once, input
// requests are put to the client as the legacy era's server-to-client
// requests; what it cannot do is -32021 naming the server. A call that
// needs a capability the client lacks is -32021 (MissingCapability) in
// both eras, its message naming the server.

// requestState is attacker-controlled input to the upstream (the spec
// makes the server bind it to the principal), and every caller reaches
// an upstream with mcpbus's credentials: with Deps.StateSealer the state
// a client sees is sealed (AES-256-GCM under the credentials key, every
// api replica holds it) with the caller, the thread, the tool and the
// digest of the call's arguments as additional data and an expiry
// (StateTTL) inside, and a retry's state must open for the same caller,
// thread, tool and arguments before it expires, or the call is invalid
// params. With Deps.UsedStates a state opens once: its first retry
// records it in that bucket (shared by the api replicas), and a second
// one, on any replica, is invalid params.

// sealedStatePrefix marks a requestState mcpbus sealed.
const sealedStatePrefix = "mcpbus1."

// StateTTL is how long a sealed requestState can be sent back (and how
// long Deps.UsedStates must remember a used one).
const StateTTL = time.Hour

// stateAD binds a sealed requestState to the caller, the thread, the tool
// and the arguments (the digest of their canonical JSON: members sorted,
// no spaces, numbers as written, so a client that sends the same
// arguments in another order or layout retries the same call).
func stateAD(x *Exchange, p *callParams) []byte {
	args := []byte(p.Arguments)
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		if canonical, err := json.Marshal(v); err == nil {
			args = canonical
		}
	}
	return []byte("mcpbus-request-state\x00" + x.UserID + "\x00" + x.Thread() + "\x00" + p.Name + "\x00" + bus.Digest(string(args)))
}

// sealState is the requestState the client gets (unchanged without a
// sealer).
func (s *Server) sealState(x *Exchange, p *callParams, state string) (string, *Error) {
	if s.deps.StateSealer == nil || state == "" {
		return state, nil
	}
	plain := binary.BigEndian.AppendUint64(nil, uint64(s.deps.Now().Add(StateTTL).Unix()))
	b, err := s.deps.StateSealer.Seal(append(plain, state...), stateAD(x, p))
	if err != nil {
		return "", Errorf(CodeInternalError, "tools/call: cannot seal the request state")
	}
	return sealedStatePrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// openState is a retry's requestState as the upstream issued it, spent
// (Deps.UsedStates) so that it opens only once.
func (s *Server) openState(ctx context.Context, x *Exchange, p *callParams) (string, *Error) {
	state := p.RequestState
	if s.deps.StateSealer == nil || state == "" {
		return state, nil
	}
	refused := stateRefused(p)
	raw, ok := strings.CutPrefix(state, sealedStatePrefix)
	if !ok || len(raw) > 2*bus.MaxRequestStateBytes {
		return "", refused
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return "", refused
	}
	plain, err := s.deps.StateSealer.Open(b, stateAD(x, p))
	if err != nil || len(plain) < 8 || s.deps.Now().Unix() > int64(binary.BigEndian.Uint64(plain)) {
		return "", refused
	}
	if s.deps.UsedStates != nil {
		_, err := s.deps.UsedStates.Create(ctx, bus.Digest(raw), []byte{1})
		if errors.Is(err, jetstream.ErrKeyExists) {
			return "", Errorf(CodeInvalidParams, "%s params: requestState was already used; send the request again without it", stateMethod(p))
		}
		if err != nil {
			s.log.Warn("request state use not recorded", "error", err)
			return "", Errorf(CodeInternalError, "tools/call: cannot record the request state's use right now; retry")
		}
	}
	return string(plain[8:]), nil
}

// stateMethod is the method of the request p is (a read's and a
// prompts/get's p.Name starts with theirs, bridgeFed).
func stateMethod(p *callParams) string {
	for _, m := range []string{"resources/read", "prompts/get"} {
		if strings.HasPrefix(p.Name, m+" ") {
			return m
		}
	}
	return "tools/call"
}

// stateRefused is the refusal of a requestState that does not open for p
// (a read's names no URI: a query may carry a token).
func stateRefused(p *callParams) *Error {
	switch m := stateMethod(p); m {
	case "resources/read":
		return Errorf(CodeInvalidParams, "%s params: requestState was not issued by mcpbus for this caller, thread and URI, or it expired; read again without it", m)
	case "prompts/get":
		return Errorf(CodeInvalidParams, "%s params: requestState was not issued by mcpbus for this caller, thread, prompt %q and arguments, or it expired; get the prompt again without it", m, strings.TrimPrefix(p.Name, m+" "))
	}
	return Errorf(CodeInvalidParams, "tools/call params: requestState was not issued by mcpbus for this caller, thread, tool %q and arguments, or it expired; call the tool again without it", p.Name)
}

// bridgeCall fills req's bridging fields for the caller's era.
func (s *Server) bridgeCall(ctx context.Context, x *Exchange, p *callParams, req *bus.Call) *Error {
	req.ClientCapabilities = &bus.ClientCapabilities{}
	if x.Session != nil {
		if x.Notify != nil && x.Session.ClientCapabilities != nil {
			caps := *x.Session.ClientCapabilities
			req.ClientCapabilities = &caps
		}
		return nil
	}
	if caps := bus.CapabilitiesOf(p.Meta.ClientCapabilities); caps != nil {
		req.ClientCapabilities = caps
	}
	if len(p.InputResponses) == 0 && p.RequestState == "" {
		return nil
	}
	state, rerr := s.openState(ctx, x, p)
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

// noStreamNote ends the -32021 message of a legacy request without a
// stream back to the client.
const noStreamNote = " (mcpbus asks a legacy client for input only on a request whose response can be a stream: Accept text/event-stream)"

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
	if x.Session != nil && x.Notify == nil {
		msg += noStreamNote
	}
	return MissingCapability(required, msg)
}

// legacyRetries bounds how often mcpbus retries an upstream's
// input_required without input requests for a legacy client.
const legacyRetries = 3

// legacyRound is the retry mcpbus makes for a legacy client after an
// upstream's input_required (round n so far): the state alone for load
// shedding (no input requests: the spec's "retry the original request",
// at most legacyRetries times), the client's answers when it can be asked
// (ask.go, at most maxAskRounds times); nil when there is none to make
// (inputRequired answers the client then).
func (s *Server) legacyRound(ctx context.Context, x *Exchange, reply bus.ToolsCallReply, n int) (*bus.CallInput, *Error) {
	ir := reply.InputRequired
	switch {
	case len(ir.InputRequests) == 0 && n < legacyRetries:
		return &bus.CallInput{RequestState: ir.RequestState}, nil
	case len(ir.InputRequests) > 0 && n < maxAskRounds && canAsk(x, ir):
		answers, rerr := s.askClient(ctx, x, "MCP server '"+reply.Server+"'", ir.InputRequests)
		if rerr != nil {
			return nil, rerr
		}
		return &bus.CallInput{InputResponses: answers, RequestState: ir.RequestState}, nil
	}
	return nil, nil
}

// inputRequired answers an upstream's input_required: relayed to a modern
// client, -32021 for a legacy one.
func (s *Server) inputRequired(x *Exchange, p *callParams, reply bus.ToolsCallReply) (any, *Error) {
	if x.Session != nil {
		switch {
		case len(reply.InputRequired.InputRequests) == 0:
			return nil, Errorf(CodeInternalError, "tools/call: MCP server '%s' asked to be called again %d times (busy); retry later", reply.Server, legacyRetries+1)
		case canAsk(x, reply.InputRequired):
			return nil, Errorf(CodeInternalError, "tools/call: MCP server '%s' still asked for input after %d rounds", reply.Server, maxAskRounds)
		}
		msg := "MCP server '" + reply.Server + "' asked for input this client cannot be asked for (a multi-round-trip result)"
		if x.Notify == nil {
			msg += noStreamNote
		}
		return nil, MissingCapability(map[string]any{}, msg)
	}
	ir := *reply.InputRequired
	var rerr *Error
	if ir.RequestState, rerr = s.sealState(x, p, ir.RequestState); rerr != nil {
		return nil, rerr
	}
	return callResult{Content: []json.RawMessage{}, Meta: reply.Meta, InputRequired: &ir}, nil
}
