// Package tokenclient is how discovery and toolcall get OAuth access tokens:
// a request to the tokens service on mcpbus.internal.token. Only the tokens
// service talks to token endpoints.
package tokenclient

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Client asks the tokens service for headers.
type Client struct {
	nc *nats.Conn
}

// New returns a client on nc.
func New(nc *nats.Conn) *Client { return &Client{nc: nc} }

// Header returns the header name and value (a secret) for req and when the
// value expires.
func (c *Client) Header(ctx context.Context, req bus.TokenRequest) (name, value string, expiresAt time.Time, err error) {
	reply, err := bus.Request[bus.TokenReply](ctx, c.nc, bus.SubjectInternalToken, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	return reply.Header, reply.Value, reply.ExpiresAt, nil
}
