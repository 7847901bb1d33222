package mcpclient

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Federation: an upstream's resources, resource templates, prompts and
// completions, as raw JSON (nothing decoded into Go types and encoded
// again, so every field a server sends, _meta and blobs included, passes
// through unchanged).

// Features is what a server declared in its capabilities besides tools.
type Features struct {
	Resources          bool `json:"resources,omitempty"`
	ResourcesSubscribe bool `json:"resources_subscribe,omitempty"`
	Prompts            bool `json:"prompts,omitempty"`
	Completions        bool `json:"completions,omitempty"`
}

func featuresOf(c mcp.ServerCapabilities) Features {
	f := Features{Prompts: c.Prompts != nil, Completions: c.Completions != nil}
	if c.Resources != nil {
		f.Resources, f.ResourcesSubscribe = true, c.Resources.Subscribe
	}
	return f
}

// List methods of ListAll and the result field holding their items.
const (
	MethodResourcesList         = "resources/list"
	MethodResourceTemplatesList = "resources/templates/list"
	MethodPromptsList           = "prompts/list"
	MethodResourcesRead         = "resources/read"
	MethodPromptsGet            = "prompts/get"
	MethodCompletionComplete    = "completion/complete"
	MethodResourcesSubscribe    = "resources/subscribe"
	MethodResourcesUnsubscribe  = "resources/unsubscribe"
	fieldResources              = "resources"
	fieldResourceTemplates      = "resourceTemplates"
	fieldPrompts                = "prompts"
)

// listField is the result field of each list method.
var listField = map[string]string{
	MethodResourcesList:         fieldResources,
	MethodResourceTemplatesList: fieldResourceTemplates,
	MethodPromptsList:           fieldPrompts,
}

// ListAll returns every item of a list method (resources/list,
// resources/templates/list, prompts/list), following pagination, each
// item the bytes the server sent.
func (c *Client) ListAll(ctx context.Context, method string) ([]json.RawMessage, error) {
	field, ok := listField[method]
	if !ok {
		return nil, c.wrap(method, errors.New("not a list method"), nil)
	}
	var items []json.RawMessage
	if err := c.walkPages(ctx, method, method, field, func(page []json.RawMessage) { items = append(items, page...) }); err != nil {
		return nil, err
	}
	return items, nil
}

// Request sends one federation request (resources/read, prompts/get,
// completion/complete, resources/subscribe, resources/unsubscribe) with
// params, a JSON object, and returns the raw result. o is what the request
// carries besides, as for CallTool (nil: nothing): o.Headers are HTTP
// headers of this request only (for stdio, the request's _meta.headers),
// checked where they were assembled; a read or prompts/get asks for
// progress and log messages with o.Progress and o.LogLevel, and a modern
// one's retry gives o.Input's answers. A JSON-RPC error is an *RPCError in
// the chain.
func (c *Client) Request(ctx context.Context, method string, params json.RawMessage, o *CallOptions) (json.RawMessage, error) {
	if o == nil {
		o = &CallOptions{}
	}
	headers := o.Headers
	switch method {
	case MethodResourcesRead, MethodPromptsGet, MethodCompletionComplete, MethodResourcesSubscribe, MethodResourcesUnsubscribe:
	default:
		return nil, c.wrap(method, errors.New("not a federation method"), nil)
	}
	if c.closed.Load() {
		return nil, c.wrap(method, ErrClosed, headerValues(headers))
	}
	p := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, c.wrap(method, errors.New("params are not a JSON object"), nil)
		}
	}
	meta := map[string]any{}
	var httpHeaders map[string]string
	if len(headers) > 0 {
		if c.kind == TransportStdio {
			meta["headers"] = headers
		} else {
			httpHeaders = headers
		}
	}
	x := exchangeFor(o, httpHeaders)
	ctx = withExchange(ctx, x)
	// Progress and log messages of a read or prompts/get, as for
	// tools/call.
	if fn := o.Progress; fn != nil && method != MethodResourcesSubscribe && method != MethodResourcesUnsubscribe {
		token, remove := c.progress.add(fn)
		defer remove()
		meta["progressToken"] = token
	}
	if lc := x.log; lc != nil {
		if c.modern {
			meta[mcp.MetaKeyLogLevel] = LogLevels[lc.rank]
		} else {
			c.askLevel(ctx, lc)
		}
	}
	if len(meta) > 0 {
		p["_meta"], _ = json.Marshal(meta)
	}
	if in := o.Input; c.modern && (method == MethodPromptsGet || method == MethodResourcesRead) {
		// A retry of a multi-round-trip answer (InputRequiredOf).
		if len(in.InputResponses) > 0 {
			p["inputResponses"] = in.InputResponses
		}
		if in.RequestState != "" {
			p["requestState"], _ = json.Marshal(in.RequestState)
		}
	}
	id, raw, err := c.send(ctx, method, p)
	if err != nil {
		if ctx.Err() != nil && !id.IsNil() {
			c.cancelRequest(id, context.Cause(ctx))
		}
		return nil, c.wrapCtx(ctx, method, err, headerValues(headers))
	}
	if c.modern && InputRequiredOf(raw) == nil {
		raw = withoutServerInfoResult(raw)
	}
	return raw, nil
}

// InputRequiredOf is a modern result's multi-round-trip answer
// (resultType "input_required", which Request returns as the server sent
// it), nil for any other result.
func InputRequiredOf(raw json.RawMessage) *InputRequired {
	s, e, _, _, ok := bus.Member(raw, "resultType")
	if !ok || string(raw[s:e]) != `"input_required"` {
		return nil
	}
	var res struct {
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  string          `json:"requestState"`
	}
	_ = json.Unmarshal(raw, &res)
	return &InputRequired{InputRequests: nonNull(res.InputRequests), RequestState: res.RequestState}
}

// withoutServerInfoResult is a modern result without the protocol fields
// mcpbus speaks itself: resultType and _meta's serverInfo. The other
// members keep the server's bytes (bus.Member finds the two without
// decoding the result: a read's contents are not decoded here).
func withoutServerInfoResult(raw json.RawMessage) json.RawMessage {
	out := bus.WithoutMember(raw, "resultType")
	s, e, _, _, ok := bus.Member(out, "_meta")
	if !ok {
		return out
	}
	meta := withoutServerInfo(out[s:e])
	if meta == nil {
		return bus.WithoutMember(out, "_meta")
	}
	return bus.WithMember(out, "_meta", meta)
}

// resourceUpdatedHandler hands the uri of each
// notifications/resources/updated to fn; one without a string uri is
// dropped.
func resourceUpdatedHandler(fn func(uri string)) func(mcp.JSONRPCNotification) {
	return func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationResourceUpdated) {
			return
		}
		if uri, ok := n.Params.AdditionalFields["uri"].(string); ok && uri != "" {
			fn(uri)
		}
	}
}
