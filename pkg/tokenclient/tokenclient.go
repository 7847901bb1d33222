// Package tokenclient is how discovery and toolcall get OAuth access tokens:
// a request to the tokens service on mcpbus.internal.token. Only the tokens
// service talks to token endpoints.
//
// A Client caches each connection's header until its expiry minus the
// server's refresh skew (both come back in the reply), and concurrent
// callers for one connection share one bus request. Tokens survive cache
// resets (the tokens service keeps the chain), so the cache ignores the
// cache generation. A Client is safe for concurrent use.
//
// "The tokens service is not up yet" (no responders on the subject) is not
// "the token endpoint failed": a caller whose context has a deadline waits
// for the tokens service, asking again with a short backoff, until it
// answers or the deadline passes.
package tokenclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/flight"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// Client asks the tokens service for headers.
type Client struct {
	nc *nats.Conn
	// subject is the tokens service's (bus.Names.InternalToken).
	subject string
	now     func() time.Time

	mu    sync.Mutex
	cache map[cacheKey]entry
	// flights are the bus requests in flight, one per connection.
	flights flight.Group[cacheKey, entry]
}

type cacheKey struct{ server, owner, user, fingerprint string }

type entry struct {
	name, value string
	expiresAt   time.Time // as the tokens service said
	freshUntil  time.Time // expiresAt minus the refresh skew
}

// Option configures a Client.
type Option func(*Client)

// WithClock sets the clock that decides when a cached header is stale
// (tests). Defaults to time.Now.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns a client on nc.
func New(nc *nats.Conn, names bus.Names, opts ...Option) *Client {
	c := &Client{nc: nc, subject: names.InternalToken(), now: time.Now, cache: map[cacheKey]entry{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Backoff of the asks while no tokens service answers (see the package doc).
const (
	noResponderFirstWait = 50 * time.Millisecond
	noResponderMaxWait   = time.Second
)

// Header returns the header name and value (a secret) for req and when the
// value expires. A cached value is returned until its expiry minus the
// refresh skew; req.ForceRefresh skips the cache (use it when the upstream
// refused the value) and replaces it. While no tokens service answers, it
// asks again until ctx's deadline (without one it returns at once).
func (c *Client) Header(ctx context.Context, req bus.TokenRequest) (name, value string, expiresAt time.Time, err error) {
	wait := noResponderFirstWait
	for {
		name, value, expiresAt, err = c.header(ctx, req)
		if err == nil || !errors.Is(err, nats.ErrNoResponders) {
			return name, value, expiresAt, err
		}
		if _, ok := ctx.Deadline(); !ok {
			return "", "", time.Time{}, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", "", time.Time{}, bus.Wrap(bus.CodeUnavailable, err,
				"the tokens service did not answer before the deadline; no OAuth access token for MCP server '"+req.Server+"'")
		case <-t.C:
		}
		wait = min(2*wait, noResponderMaxWait)
	}
}

// header is one ask: the cache, else the flight for req's connection.
func (c *Client) header(ctx context.Context, req bus.TokenRequest) (name, value string, expiresAt time.Time, err error) {
	k := cacheKey{req.Server, req.Owner, req.UserID, req.ConfigFingerprint}
	c.mu.Lock()
	if e, ok := c.cache[k]; ok && !req.ForceRefresh && c.now().Before(e.freshUntil) {
		c.mu.Unlock()
		return e.name, e.value, e.expiresAt, nil
	}
	fetch := func(ctx context.Context, _ func() bool) (entry, error) { return c.fetch(ctx, k, req) }
	// The request runs on its own context (fetch bounds it; it carries
	// only the starter's span, so the flight joins its trace), so a caller
	// that gives up does not fail the others. A forced refresh is never
	// joined.
	base := tracing.WithSpanOf(context.Background(), ctx)
	var f *flight.Call[entry]
	if req.ForceRefresh {
		f = c.flights.Alone(base, fetch)
	} else {
		f, _ = c.flights.Start(base, k, fetch)
	}
	c.mu.Unlock()
	e, err := f.Wait(ctx)
	if flight.WaitEnded(err) {
		return "", "", time.Time{}, bus.Wrap(bus.CodeUpstreamTimeout, ctx.Err(), "timed out waiting for an OAuth access token for MCP server '"+req.Server+"'")
	}
	return e.name, e.value, e.expiresAt, err
}

// fetch makes the one bus request of a flight, within bus.DefaultTimeout,
// and caches its header.
func (c *Client) fetch(ctx context.Context, k cacheKey, req bus.TokenRequest) (entry, error) {
	ctx, cancel := context.WithTimeout(ctx, bus.DefaultTimeout)
	defer cancel()
	reply, err := bus.Request[bus.TokenReply](ctx, c.nc, c.subject, req)
	if err != nil {
		return entry{}, err
	}
	e := entry{name: reply.Header, value: reply.Value, expiresAt: reply.ExpiresAt,
		freshUntil: reply.ExpiresAt.Add(-time.Duration(max(reply.RefreshSkewSeconds, 0)) * time.Second)}
	c.mu.Lock()
	for old := range c.cache { // drop entries of older config versions
		if old.server == k.server && old.owner == k.owner {
			delete(c.cache, old)
		}
	}
	c.cache[k] = e
	c.mu.Unlock()
	return e, nil
}

// Refresh tells the tokens service that the upstream refused
// rejectedValue (the header value MergeHeaders sent) and caches the
// replacement, so the next MergeHeaders sends it. Many callers refused with
// the same value cause one refresh: the tokens service hands out a newer
// value instead of refreshing again. Only a hash of rejectedValue travels.
func (c *Client) Refresh(ctx context.Context, srv *config.Server, owner, rejectedValue string) error {
	req := bus.TokenRequest{Server: srv.Name, Owner: owner, ConfigFingerprint: srv.Fingerprint, ForceRefresh: true}
	if rejectedValue != "" {
		sum := sha256.Sum256([]byte(rejectedValue))
		req.RejectedValueSHA256 = hex.EncodeToString(sum[:])
	}
	_, _, _, err := c.Header(ctx, req)
	return err
}

// Forget drops the cached header of a connection (all config versions).
func (c *Client) Forget(server, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.cache {
		if k.server == server && k.owner == owner {
			delete(c.cache, k)
		}
	}
}

// MergeHeaders returns the headers to send to srv: a copy of static, plus
// the OAuth header when srv has an enabled oauth block. The OAuth header
// overrides a static header of the same name in any letter case and keeps
// the spelling the static headers already use, so each name is sent once.
// owner is "" for deployment servers. A server without OAuth makes no bus
// request. Errors are *bus.Error (oauth_failed, unavailable, …) whose
// message names the server and never contains a secret.
func (c *Client) MergeHeaders(ctx context.Context, srv *config.Server, owner string, static map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(static)+1)
	for k, v := range static {
		out[k] = v
	}
	if srv == nil || !srv.OAuthEnabled() {
		return out, nil
	}
	name, value, _, err := c.Header(ctx, bus.TokenRequest{Server: srv.Name, Owner: owner, ConfigFingerprint: srv.Fingerprint})
	if err != nil {
		return nil, err
	}
	headers.Set(out, name, value)
	return out, nil
}
