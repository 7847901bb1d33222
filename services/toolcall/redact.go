package toolcall

import (
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/redact"
)

// Tool results are redacted before they leave the chain's end: an upstream
// that reflects its credentials (a whoami tool, an error text quoting the
// request) must not hand them to the caller. The known secrets are the
// server's configured ones (config.Server.SecretValues: env and header
// values, oauth and user_auth secrets, URL credentials) and every header
// value the call was sent with (the OAuth access token, the user_auth
// credential, the headers_from_context secrets), each of at least
// redact.MinResultLen bytes. Every caller gets the redacted result, admins
// included: toolcall does not know roles, and an admin reads the secrets
// in the config. A call without such values costs nothing more.

// resultRedactor is the redactor of r's result, nil when there is nothing
// to redact.
func resultRedactor(srv *config.Server, r *interceptors.Request) *redact.Redactor {
	values := srv.SecretValues()
	for _, v := range r.Headers {
		values = append(values, v)
	}
	return redact.ForResults(values...)
}

// redactResult returns res with red's values masked in its content blocks
// (isError texts included), structuredContent and _meta, and err with
// them masked in its message; a native task request's raw result and
// JSON-RPC error (in u's nativeOp) are masked the same way.
func redactResult(u *upcall, red *redact.Redactor, res *interceptors.Result, err error) (*interceptors.Result, error) {
	if red == nil {
		return res, err
	}
	if op := u.native; op != nil {
		op.result = red.JSON(op.result)
		if op.rpcError != nil {
			rpc := *op.rpcError
			rpc.Message = red.String(rpc.Message)
			op.rpcError = &rpc
		}
	}
	if err != nil {
		return res, bus.Redact(err, red)
	}
	if res == nil {
		return nil, nil
	}
	out := *res
	out.Content = make([]json.RawMessage, len(res.Content))
	for i, c := range res.Content {
		out.Content[i] = red.JSON(c)
	}
	if res.Content == nil {
		out.Content = nil
	}
	out.StructuredContent = red.JSON(res.StructuredContent)
	out.Meta = red.JSON(res.Meta)
	return &out, nil
}
