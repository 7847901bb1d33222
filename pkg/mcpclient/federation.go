package mcpclient

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
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
// params, a JSON object, and returns the raw result. headers are HTTP
// headers of this request only (for stdio, the request's _meta.headers),
// checked where they were assembled, as for CallTool. A JSON-RPC error is
// an *RPCError in the chain.
func (c *Client) Request(ctx context.Context, method string, params json.RawMessage, headers map[string]string) (json.RawMessage, error) {
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
	if len(headers) > 0 {
		if c.kind == TransportStdio {
			b, _ := json.Marshal(map[string]any{"headers": headers})
			p["_meta"] = b
		} else {
			ctx = withExchange(ctx, exchangeFor(nil, headers))
		}
	}
	id, raw, err := c.send(ctx, method, p)
	if err != nil {
		if ctx.Err() != nil && !id.IsNil() {
			c.cancelRequest(id, context.Cause(ctx))
		}
		return nil, c.wrapCtx(ctx, method, err, headerValues(headers))
	}
	if c.modern {
		raw = withoutServerInfoResult(raw)
	}
	return raw, nil
}

// withoutServerInfoResult is a modern result without the protocol fields
// mcpbus speaks itself: resultType and _meta's serverInfo.
func withoutServerInfoResult(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "resultType")
	if meta, ok := m["_meta"]; ok {
		if meta = withoutServerInfo(meta); meta == nil {
			delete(m, "_meta")
		} else {
			m["_meta"] = meta
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
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
