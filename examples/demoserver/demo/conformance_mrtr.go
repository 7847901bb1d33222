package demo

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The conformance fixture's multi-round-trip tools (SEP-2322, protocol
// 2026-07-28), written from the input-required-result-* scenarios of
// @modelcontextprotocol/conformance 0.2.0-alpha.12. Each returns an
// InputRequiredResult (resultType "input_required", inputRequests and,
// where the scenario asks, a requestState) until the retry carries the
// answers it asked for. A modern client gets that result; for a legacy
// client mcp-go performs the requests itself (elicitation/create,
// sampling/createMessage, roots/list) and calls the handler again.
//
// Every requestState is signed with a key of the process (stateSigner), so
// a tampered one is refused with a JSON-RPC error; a retry whose answers
// are missing or malformed gets the input request again.

// stateSigner signs and checks requestState values.
type stateSigner struct{ key []byte }

func newStateSigner() *stateSigner {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("demo: no randomness for the requestState key: " + err.Error())
	}
	return &stateSigner{key: key}
}

// sign returns payload with its HMAC: "<payload>.<mac>", both base64url.
func (s *stateSigner) sign(payload string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

func (s *stateSigner) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// errTamperedState is a requestState that fails its integrity check.
var errTamperedState = errors.New("requestState failed its integrity check (tampered with, or issued by another server process)")

// open returns the payload of a state sign made, or errTamperedState.
func (s *stateSigner) open(state string) (string, error) {
	p, m, ok := strings.Cut(state, ".")
	if !ok {
		return "", errTamperedState
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	mac, err2 := base64.RawURLEncoding.DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(string(payload))) {
		return "", errTamperedState
	}
	return string(payload), nil
}

// askName is the elicitation of a name (input-required-result-basic-elicitation).
func askName(message string) mcp.ElicitationParams { return askNamed(message, "name") }

// askConfirm is the elicitation of a boolean "ok".
func askConfirm() mcp.ElicitationParams {
	return mcp.ElicitationParams{Message: "Please confirm", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"},
	}}
}

// askLLM is a sampling request of one user message.
func askLLM(text string, maxTokens int) mcp.CreateMessageParams {
	return mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(text)}}, MaxTokens: maxTokens}
}

// accepted returns the content of an accepted elicitation answered under
// id, and whether there is one (a missing, malformed, declined or
// cancelled answer is not).
func accepted(responses mcp.InputResponses, id string) (map[string]any, bool) {
	res := server.ElicitationResponse(responses, id)
	if res == nil || res.Action != mcp.ElicitationResponseActionAccept {
		return nil, false
	}
	content, _ := res.Content.(map[string]any)
	return content, content != nil
}

// sampledText is the text of the sampling result answered under id.
func sampledText(responses mcp.InputResponses, id string) (string, bool) {
	res := server.SamplingResponse(responses, id)
	if res == nil {
		return "", false
	}
	raw, _ := json.Marshal(res.Content)
	var block struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &block)
	return block.Text, true
}

// clientCaps are the capabilities a modern request declares (nil for a
// legacy request: its client's capabilities are its session's).
func clientCaps(ctx context.Context) *mcp.ClientCapabilities {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.ClientCapabilities
	}
	return nil
}

// addMRTRTools registers the multi-round-trip tools and prompt on s.
func addMRTRTools(s *server.MCPServer) {
	addInputRequiredResource(s)
	signer := newStateSigner()
	noArgs := func(name, desc string) mcp.Tool { return mcp.NewTool(name, mcp.WithDescription(desc)) }

	s.AddTool(noArgs("test_input_required_result_elicitation", "Asks for a name (input_required), then greets."), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		content, ok := accepted(req.Params.InputResponses, "user_name")
		if !ok {
			return server.NewInputRequestBuilder("").Elicit("user_name", askName("What is your name?")).ToolResult(), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("Hello, %v!", content["name"])), nil
	})
	s.AddTool(noArgs("test_input_required_result_sampling", "Asks the client's LLM (input_required), then returns its answer."), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, ok := sampledText(req.Params.InputResponses, "capital_question")
		if !ok {
			return server.NewInputRequestBuilder("").Sample("capital_question", askLLM("What is the capital of France?", 100)).ToolResult(), nil
		}
		return mcp.NewToolResultText("LLM response: " + text), nil
	})
	s.AddTool(noArgs("test_input_required_result_list_roots", "Asks for the client's roots (input_required), then lists them."), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		roots := server.RootsResponse(req.Params.InputResponses, "client_roots")
		if roots == nil {
			return server.NewInputRequestBuilder("").Roots("client_roots").ToolResult(), nil
		}
		uris := make([]string, 0, len(roots.Roots))
		for _, r := range roots.Roots {
			uris = append(uris, r.URI)
		}
		return mcp.NewToolResultText("Client roots: " + strings.Join(uris, ", ")), nil
	})
	// confirmed is the request-state and tampered-state tools: a signed
	// state with the confirmation, "state-ok" once both come back.
	confirmed := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			if _, err := signer.open(req.Params.RequestState); err != nil {
				return nil, err
			}
		}
		if _, ok := accepted(req.Params.InputResponses, "confirm"); !ok || req.Params.RequestState == "" {
			return server.NewInputRequestBuilder(signer.sign(req.Params.Name+":confirm")).Elicit("confirm", askConfirm()).ToolResult(), nil
		}
		return mcp.NewToolResultText("Confirmed: state-ok"), nil
	}
	s.AddTool(noArgs("test_input_required_result_request_state", "Asks for a confirmation with a requestState, checks the state on retry."), confirmed)
	s.AddTool(noArgs("test_input_required_result_tampered_state", "Like the request-state tool; a tampered requestState is an error."), confirmed)
	s.AddTool(noArgs("test_input_required_result_multiple_inputs", "Asks for a name, an LLM greeting and the roots at once."), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			if _, err := signer.open(req.Params.RequestState); err != nil {
				return nil, err
			}
		}
		content, okName := accepted(req.Params.InputResponses, "user_name")
		greeting, okGreeting := sampledText(req.Params.InputResponses, "greeting")
		roots := server.RootsResponse(req.Params.InputResponses, "client_roots")
		if !okName || !okGreeting || roots == nil || req.Params.RequestState == "" {
			return server.NewInputRequestBuilder(signer.sign("multiple")).
				Elicit("user_name", askName("What is your name?")).
				Sample("greeting", askLLM("Generate a greeting", 50)).
				Roots("client_roots").ToolResult(), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("%s, %v! (%d roots)", greeting, content["name"], len(roots.Roots))), nil
	})
	s.AddTool(noArgs("test_input_required_result_multi_round", "Asks for a name, then a colour, with a new requestState each round."), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		round := "round-1"
		if req.Params.RequestState != "" {
			var err error
			if round, err = signer.open(req.Params.RequestState); err != nil {
				return nil, err
			}
		}
		step2 := func(state string) *mcp.CallToolResult {
			return server.NewInputRequestBuilder(state).Elicit("step2", askNamed("Step 2: What is your favorite color?", "color")).ToolResult()
		}
		if name, ok := strings.CutPrefix(round, "round-2:"); ok {
			content, ok := accepted(req.Params.InputResponses, "step2")
			if !ok {
				return step2(req.Params.RequestState), nil
			}
			return mcp.NewToolResultText(fmt.Sprintf("%s likes %v", name, content["color"])), nil
		}
		content, ok := accepted(req.Params.InputResponses, "step1")
		if round != "round-1" || !ok || req.Params.RequestState == "" {
			return server.NewInputRequestBuilder(signer.sign("round-1")).Elicit("step1", askNamed("Step 1: What is your name?", "name")).ToolResult(), nil
		}
		return step2(signer.sign("round-2:" + fmt.Sprint(content["name"]))), nil
	})
	s.AddTool(noArgs("test_input_required_result_capabilities", "Asks only for the input kinds the request's client capabilities declare."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caps := clientCaps(ctx)
		if caps == nil {
			caps = &mcp.ClientCapabilities{}
		}
		b := server.NewInputRequestBuilder("")
		asked := 0
		if caps.Sampling != nil && server.SamplingResponse(req.Params.InputResponses, "capital_question") == nil {
			b.Sample("capital_question", askLLM("What is the capital of France?", 100))
			asked++
		}
		if caps.Elicitation != nil {
			if _, ok := accepted(req.Params.InputResponses, "user_name"); !ok {
				b.Elicit("user_name", askName("What is your name?"))
				asked++
			}
		}
		if caps.Roots != nil && server.RootsResponse(req.Params.InputResponses, "client_roots") == nil {
			b.Roots("client_roots")
			asked++
		}
		if asked > 0 {
			return b.ToolResult(), nil
		}
		return mcp.NewToolResultText("Nothing left to ask for the declared capabilities"), nil
	})
	// test_streaming_elicitation (server-stateless) needs input: a modern
	// request gets it asked in its result, never as a request on the
	// response stream.
	s.AddTool(noArgs("test_streaming_elicitation", "Asks for a name while its response streams (input_required, never a request on the stream)."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		content, ok := accepted(req.Params.InputResponses, "user_name")
		if !ok {
			return server.NewInputRequestBuilder("").Elicit("user_name", askName("What is your name?")).ToolResult(), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("Hello, %v!", content["name"])), nil
	})
	// test_missing_capability needs the client's sampling: over HTTP a
	// modern request that does not declare it is refused with -32021 before
	// it gets here (ConformanceHTTP); elsewhere the handler refuses it.
	s.AddTool(noArgs("test_missing_capability", "Needs the client's sampling capability (-32021 when a request does not declare it)."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if caps := clientCaps(ctx); caps != nil && caps.Sampling == nil {
			return nil, mcp.MissingRequiredClientCapabilityError{Capability: "sampling"}
		}
		text, ok := sampledText(req.Params.InputResponses, "capital_question")
		if !ok {
			return server.NewInputRequestBuilder("").Sample("capital_question", askLLM("What is the capital of France?", 100)).ToolResult(), nil
		}
		return mcp.NewToolResultText("LLM response: " + text), nil
	})

	s.AddPrompt(mcp.NewPrompt("test_input_required_result_prompt", mcp.WithPromptDescription("Asks for the context to use (input_required), then returns the prompt.")),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			content, ok := accepted(req.Params.InputResponses, "user_context")
			if !ok {
				// The requestState is not checked on the retry (a client
				// need not send one back); mcpbus seals it to the caller.
				return server.NewInputRequestBuilder("").Elicit("user_context", askNamed("What context should the prompt use?", "context")).
					RequestState("prompt-state-1").PromptResult(), nil
			}
			return mcp.NewGetPromptResult("A prompt with the context the user gave",
				[]mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(fmt.Sprintf("Use this context: %v", content["context"])))}), nil
		})
}

// InputRequiredResourceURI is the fixture's resource whose 2026-07-28
// read asks for the context to use (input_required, with a requestState)
// until the retry answers it; its text then quotes the answer.
const InputRequiredResourceURI = "test://input-required-resource"

// addInputRequiredResource adds InputRequiredResourceURI. mcp-go's
// resource handlers return contents only, so the after-read hook turns a
// read without the answer into the input_required result.
func addInputRequiredResource(s *server.MCPServer) {
	s.AddResource(mcp.NewResource(InputRequiredResourceURI, "Input-required resource", mcp.WithMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			content, _ := accepted(req.Params.InputResponses, "user_context")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: InputRequiredResourceURI, MIMEType: "text/plain",
				Text: fmt.Sprintf("Resource read with the context: %v", content["context"])}}, nil
		})
	hooks := s.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(s)
	}
	hooks.AddAfterReadResource(func(ctx context.Context, _ any, req *mcp.ReadResourceRequest, res *mcp.ReadResourceResult) {
		if req.Params.URI != InputRequiredResourceURI || res == nil {
			return
		}
		if _, ok := accepted(req.Params.InputResponses, "user_context"); ok && req.Params.RequestState == inputRequiredResourceState {
			return
		}
		*res = *server.NewInputRequestBuilder("").Elicit("user_context", askNamed("What context should the read use?", "context")).
			RequestState(inputRequiredResourceState).ResourceResult()
	})
}

// inputRequiredResourceState is the requestState the fixture's resource
// gives and wants back.
const inputRequiredResourceState = "resource-state-1"

// askNamed is the elicitation of one required string field.
func askNamed(message, field string) mcp.ElicitationParams {
	return mcp.ElicitationParams{Message: message, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{field: map[string]any{"type": "string"}}, "required": []string{field},
	}}
}
