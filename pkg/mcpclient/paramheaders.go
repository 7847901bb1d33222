package mcpclient

import (
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// Custom headers from tool parameters (2026-07-28, streamable HTTP): a
// tool's inputSchema may mark primitive properties with x-mcp-header; a
// client mirrors their values into Mcp-Param-{name} headers of tools/call
// (Base64-wrapped where the value is not plain ASCII, omitted when null
// or absent) and excludes from tools/list any tool whose annotations are
// invalid (empty, not a header token, on a non-primitive type, duplicated
// case-insensitively), so that one bad definition does not stop the
// others. mcp-go's rules (mcp.GenerateParamHeaders,
// mcp.ValidateParamHeaderAnnotations) are used as they are.

// paramHeaders sets on h the Mcp-Param-* headers of a tools/call with
// params (encoded) for a tool with inputSchema schema.
func paramHeaders(h http.Header, schema json.RawMessage, params json.RawMessage) {
	if len(schema) == 0 {
		return
	}
	for k, v := range mcp.GenerateParamHeaders(&mcp.Tool{RawInputSchema: schema}, params) {
		h.Set(k, v)
	}
}

// validParamAnnotations reports whether t's x-mcp-header annotations are
// valid (a tool without any is).
func validParamAnnotations(t Tool) error {
	if len(t.InputSchema) == 0 {
		return nil
	}
	return mcp.ValidateParamHeaderAnnotations(&mcp.Tool{Name: t.Name, RawInputSchema: t.InputSchema})
}
