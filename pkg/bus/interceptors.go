package bus

import "encoding/json"

// External interceptors.
//
// An mcpInterceptors entry "nats:<subject>" is an interceptor living in
// another process. For every call to a server it was built for, the
// toolcall service sends an InterceptRequest to <subject> (request/reply,
// JSON) at the interceptor's place in the chain (after OAuth and user_auth,
// before headers_from_context) and applies the InterceptReply:
//
//   - Error set (or a reply with the Mcpbus-Error header): the call fails
//     with that code (default forbidden; internal is reported as
//     unavailable) and message; nothing goes upstream.
//   - Result set: the call is answered with it and nothing goes upstream.
//   - Otherwise Headers are set on the call (each replacing any spelling of
//     the same name; an empty value removes the header) and Arguments, when
//     present, replace the call's arguments.
//
// No responder or a timeout fails the call as unavailable: an interceptor
// that may add credentials or checks is never skipped silently. Request
// secrets (context.secrets) are never sent; Headers holds the headers the
// call carries at that point (static, OAuth, user_auth), which are secrets
// too, so the subject must stay inside the deployment.

// InterceptRequest is one tool call as an external interceptor sees it.
type InterceptRequest struct {
	// Server is the MCP server's name; Tool the server's raw tool name and
	// VisibleName the name the agent called.
	Server      string `json:"server"`
	Transport   string `json:"transport"`
	Tool        string `json:"tool"`
	VisibleName string `json:"visible_name"`
	// Arguments are the call's arguments (a JSON object or absent).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Headers are the headers the call carries so far.
	Headers    map[string]string `json:"headers"`
	UserID     string            `json:"user_id"`
	ThreadID   string            `json:"thread_id"`
	RunID      string            `json:"run_id,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// InterceptReply is an external interceptor's answer (all fields optional;
// an empty object lets the call continue unchanged).
type InterceptReply struct {
	Headers   map[string]string `json:"headers,omitempty"`
	Arguments json.RawMessage   `json:"arguments,omitempty"`
	Result    *InterceptResult  `json:"result,omitempty"`
	Error     *InterceptError   `json:"error,omitempty"`
}

// InterceptResult short-circuits the call: it becomes the call's reply.
type InterceptResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structured_content,omitempty"`
	IsError           bool              `json:"is_error"`
}

// InterceptError fails the call. Code is one of the error codes (default
// forbidden); Message is shown to the caller.
type InterceptError struct {
	Code    Code   `json:"code,omitempty"`
	Message string `json:"message"`
}
