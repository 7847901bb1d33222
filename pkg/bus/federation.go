package bus

import (
	"encoding/json"
	"strings"
)

// Federation envelopes: resources, resource templates, prompts and
// completions of the upstream servers (docs/federation.md §3). Entries
// carry visible names and URIs; everything else is the upstream's.

// The federation verbs (served on the plain subject and, with per-user
// subjects on, on every user's subject).
const (
	VerbResourcesList         Verb = "resources.list"
	VerbResourceTemplatesList Verb = "resources.templates.list"
	VerbPromptsList           Verb = "prompts.list"
	VerbResourcesRead         Verb = "resources.read"
	VerbPromptsGet            Verb = "prompts.get"
	VerbCompletionComplete    Verb = "completion.complete"
)

func (n Names) ResourcesList() string         { return n.Plain(VerbResourcesList) }
func (n Names) ResourceTemplatesList() string { return n.Plain(VerbResourceTemplatesList) }
func (n Names) PromptsList() string           { return n.Plain(VerbPromptsList) }
func (n Names) ResourcesRead() string         { return n.Plain(VerbResourcesRead) }
func (n Names) PromptsGet() string            { return n.Plain(VerbPromptsGet) }
func (n Names) CompletionComplete() string    { return n.Plain(VerbCompletionComplete) }

// Resource is one upstream resource: its visible URI, its server, and the
// upstream's other fields unchanged.
type Resource struct {
	MCPResource
	Server string `json:"server"`
}

// MCPResource is a resource as MCP lists it (resources/list), its URI
// visible: what /mcp serves of a Resource.
type MCPResource struct {
	URI         string          `json:"uri"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	Size        *int64          `json:"size,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// ResourceTemplate is one upstream resource template, its uriTemplate
// visible.
type ResourceTemplate struct {
	MCPResourceTemplate
	Server string `json:"server"`
}

// MCPResourceTemplate is a template as MCP lists it
// (resources/templates/list), its uriTemplate visible.
type MCPResourceTemplate struct {
	URITemplate string          `json:"uriTemplate"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// Prompt is one upstream prompt under its visible name.
type Prompt struct {
	MCPPrompt
	Server       string `json:"server"`
	OriginalName string `json:"original_name"`
	// Personal is set for a prompt of the caller's personal connection.
	Personal bool `json:"personal,omitempty"`
}

// MCPPrompt is a prompt as MCP lists it (prompts/list), under its
// visible name.
type MCPPrompt struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// FedListRequest is the body of mcpbus.resources.list,
// mcpbus.resources.templates.list and mcpbus.prompts.list.
type FedListRequest struct {
	UserID   string `json:"user_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
	PageSize int    `json:"page_size,omitempty"`
	Cursor   string `json:"cursor,omitempty"`
	// VirtualServer names the virtual server the caller uses: only what
	// that set holds is listed, read or got (forbidden otherwise).
	VirtualServer string `json:"virtual_server,omitempty"`
}

// ResourcesListReply is the reply of mcpbus.resources.list.
type ResourcesListReply struct {
	Generation    int64          `json:"generation"`
	Revision      string         `json:"revision"`
	Resources     []Resource     `json:"resources"`
	NextCursor    string         `json:"next_cursor,omitempty"`
	FailedServers []FailedServer `json:"failed_servers"`
}

// ResourceTemplatesListReply is the reply of
// mcpbus.resources.templates.list.
type ResourceTemplatesListReply struct {
	Generation        int64              `json:"generation"`
	Revision          string             `json:"revision"`
	ResourceTemplates []ResourceTemplate `json:"resource_templates"`
	NextCursor        string             `json:"next_cursor,omitempty"`
	FailedServers     []FailedServer     `json:"failed_servers"`
}

// PromptsListReply is the reply of mcpbus.prompts.list.
type PromptsListReply struct {
	Generation    int64          `json:"generation"`
	Revision      string         `json:"revision"`
	Prompts       []Prompt       `json:"prompts"`
	NextCursor    string         `json:"next_cursor,omitempty"`
	FailedServers []FailedServer `json:"failed_servers"`
}

// ResourcesReadRequest is the body of mcpbus.resources.read.
type ResourcesReadRequest struct {
	URI           string          `json:"uri"`
	UserID        string          `json:"user_id,omitempty"`
	ThreadID      string          `json:"thread_id,omitempty"`
	Context       *CallContext    `json:"context,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	TimeoutMS     int64           `json:"timeout_ms,omitempty"`
	ProgressInbox string          `json:"progress_inbox,omitempty"`
	LogLevel      string          `json:"log_level,omitempty"`
	// VirtualServer names the virtual server the caller uses: only what
	// that set holds is listed, read or got (forbidden otherwise).
	VirtualServer string `json:"virtual_server,omitempty"`
	// ClientCapabilities and Input bridge a 2026-07-28 multi-round-trip
	// answer as for a tool call (ToolsCallRequest's fields of the same
	// names).
	ClientCapabilities *ClientCapabilities `json:"client_capabilities,omitempty"`
	Input              *CallInput          `json:"input,omitempty"`
}

// ResourcesReadReply is the reply of mcpbus.resources.read: the
// upstream's contents, each uri visible, blobs the upstream's base64.
// InputRequired is the upstream's multi-round-trip answer instead (no
// contents).
type ResourcesReadReply struct {
	URI           string            `json:"uri"`
	Server        string            `json:"server"`
	Contents      []json.RawMessage `json:"contents"`
	InputRequired *InputRequired    `json:"input_required,omitempty"`
}

// PromptsGetRequest is the body of mcpbus.prompts.get.
type PromptsGetRequest struct {
	Name          string          `json:"name"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	UserID        string          `json:"user_id,omitempty"`
	ThreadID      string          `json:"thread_id,omitempty"`
	Context       *CallContext    `json:"context,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	TimeoutMS     int64           `json:"timeout_ms,omitempty"`
	ProgressInbox string          `json:"progress_inbox,omitempty"`
	LogLevel      string          `json:"log_level,omitempty"`
	// ClientCapabilities and Input bridge a 2026-07-28 multi-round-trip
	// answer as for a tool call (Call's fields of the same
	// names).
	ClientCapabilities *ClientCapabilities `json:"client_capabilities,omitempty"`
	Input              *CallInput          `json:"input,omitempty"`
	// VirtualServer names the virtual server the caller uses: only what
	// that set holds is listed, read or got (forbidden otherwise).
	VirtualServer string `json:"virtual_server,omitempty"`
}

// PromptsGetReply is the reply of mcpbus.prompts.get: the messages'
// resource links and embedded resources carry visible URIs. InputRequired
// is the upstream's multi-round-trip answer instead (no messages).
type PromptsGetReply struct {
	Name          string            `json:"name"`
	Server        string            `json:"server"`
	Description   string            `json:"description,omitempty"`
	Messages      []json.RawMessage `json:"messages"`
	Meta          json.RawMessage   `json:"_meta,omitempty"`
	InputRequired *InputRequired    `json:"input_required,omitempty"`
}

// CompletionRef is what a completion completes: a prompt by visible name
// (type "ref/prompt") or a resource or template by visible URI
// ("ref/resource").
type CompletionRef struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// Completion reference types.
const (
	RefPrompt   = "ref/prompt"
	RefResource = "ref/resource"
)

// CompletionArgument is the argument being completed.
type CompletionArgument struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CompletionRequest is the body of mcpbus.completion.complete.
type CompletionRequest struct {
	Ref              CompletionRef      `json:"ref"`
	Argument         CompletionArgument `json:"argument"`
	ContextArguments map[string]string  `json:"context_arguments,omitempty"`
	UserID           string             `json:"user_id,omitempty"`
	ThreadID         string             `json:"thread_id,omitempty"`
	Context          *CallContext       `json:"context,omitempty"`
	TimeoutMS        int64              `json:"timeout_ms,omitempty"`
	// VirtualServer names the virtual server the caller uses: only what
	// that set holds is listed, read or got (forbidden otherwise).
	VirtualServer string `json:"virtual_server,omitempty"`
}

// CompletionReply is the reply of mcpbus.completion.complete: the
// upstream's completion object ({"values": []} when the server does not
// complete).
type CompletionReply struct {
	Server     string          `json:"server"`
	Completion json.RawMessage `json:"completion"`
}

// RejectMetadataAuthToken refuses a legacy metadata.auth_token in a
// federation request, as RejectAuthToken does for a tool call.
func RejectMetadataAuthToken(meta json.RawMessage) error {
	r := Call{Metadata: meta}
	return r.RejectAuthToken()
}

// StripQuery is uri without its query and fragment: what logs and audit
// may show of a URI (a query may carry a token).
func StripQuery(uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		return uri[:i]
	}
	return uri
}
