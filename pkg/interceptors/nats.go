package interceptors

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/headers"
)

// DefaultNATSTimeout bounds one request to an external interceptor.
const DefaultNATSTimeout = 10 * time.Second

// NATS returns an interceptor that asks subject (pkg/bus/interceptors.go).
func NATS(nc *nats.Conn, subject string, timeout time.Duration) Interceptor {
	return func(ctx context.Context, req *Request, next Handler) (*Result, error) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		h := req.Headers
		if h == nil {
			h = map[string]string{}
		}
		reply, err := bus.Request[bus.InterceptReply](rctx, nc, subject, bus.InterceptRequest{
			Server: req.Server, Transport: req.Transport, Tool: req.Tool, VisibleName: req.VisibleName,
			Arguments: req.Arguments, Headers: h,
			UserID: req.UserID, ThreadID: req.ThreadID, RunID: req.RunID, ToolCallID: req.ToolCallID,
		})
		if err != nil {
			be := bus.AsError(err)
			switch be.Code {
			case bus.CodeUnavailable, bus.CodeUpstreamTimeout, bus.CodeInternal:
				return nil, bus.Wrap(bus.CodeUnavailable, err, "MCP interceptor 'nats:"+subject+"' for server '"+req.Server+"' did not answer")
			}
			return nil, be
		}
		if reply.Error != nil {
			code := reply.Error.Code
			if code == "" {
				code = bus.CodeForbidden
			}
			return nil, &bus.Error{Code: code, Message: reply.Error.Message}
		}
		if reply.Result != nil {
			return &Result{Content: reply.Result.Content, StructuredContent: reply.Result.StructuredContent, IsError: reply.Result.IsError}, nil
		}
		for k, v := range reply.Headers {
			if v == "" {
				for name := range req.Headers {
					if strings.EqualFold(name, k) {
						delete(req.Headers, name)
					}
				}
				continue
			}
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			headers.Set(req.Headers, k, v)
		}
		if len(reply.Arguments) > 0 && string(reply.Arguments) != "null" {
			req.Arguments = reply.Arguments
		}
		return next(ctx, req)
	}
}
