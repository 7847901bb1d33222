package mcpclient

import (
	"context"
	"maps"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// sseTimeout replaces mcp-go's caps on waiting for the SSE endpoint (30 s)
// and for a response (60 s); the callers' ctx deadlines are the real limits.
const sseTimeout = 24 * time.Hour

type requestHeadersKey struct{}

// withRequestHeaders returns ctx carrying per-request HTTP headers for the
// transports' header funcs.
func withRequestHeaders(ctx context.Context, h map[string]string) context.Context {
	return context.WithValue(ctx, requestHeadersKey{}, maps.Clone(h))
}

// requestHeaders is the transports' header func. mcp-go applies its result
// with Header.Set after the static headers, so a per-request header replaces
// a static one of the same name regardless of case.
func requestHeaders(ctx context.Context) map[string]string {
	h, _ := ctx.Value(requestHeadersKey{}).(map[string]string)
	return h
}

func httpClient(spec Spec) *http.Client {
	if spec.HTTPClient != nil {
		return spec.HTTPClient
	}
	return &http.Client{}
}

func (c *Client) newStreamableTransport(spec Spec) (transport.Interface, error) {
	return transport.NewStreamableHTTP(spec.URL,
		transport.WithHTTPHeaders(maps.Clone(spec.Headers)),
		transport.WithHTTPHeaderFunc(requestHeaders),
		transport.WithHTTPBasicClient(httpClient(spec)),
		transport.WithHTTPLogger(c.logger),
	)
}

func (c *Client) newSSETransport(spec Spec) (transport.Interface, error) {
	return transport.NewSSE(spec.URL,
		transport.WithHeaders(maps.Clone(spec.Headers)),
		transport.WithHeaderFunc(requestHeaders),
		transport.WithHTTPClient(httpClient(spec)),
		transport.WithSSELogger(c.logger),
		transport.WithEndpointTimeout(sseTimeout),
		transport.WithResponseTimeout(sseTimeout),
	)
}
