package tokens

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/flight"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// accessToken is an access token this process holds.
type accessToken struct {
	access, tokenType string
	expiresAt         time.Time
	fingerprint       string // of the chain (config) it was obtained for
	shape             string // of the request that obtained it
}

// usable reports whether t can be handed out for a connection with this
// fingerprint and request shape at now with the refresh skew.
func (t *accessToken) usable(fp, shape string, now time.Time, skew time.Duration) bool {
	return t != nil && t.fingerprint == fp && t.shape == shape && t.expiresAt.Add(-skew).After(now)
}

// conn is one connection's state in this process. mu guards every field;
// storeMu serialises writes of the row so an older pending row never
// overwrites a newer one.
type conn struct {
	key   string // the row key: server name, a personal runtime name, or a connected account's key
	owner string // "" for deployment servers; the user of a personal connection or a per-user account
	// personal: the token endpoint is a user's choice and passes the
	// egress policy.
	personal bool

	mu      sync.Mutex
	tok     *accessToken
	memRT   string // memory-only chain head (no database or no key)
	memFP   string // the fingerprint memRT continues
	pending *store.OAuthToken
	retry   bool // a store-retry loop runs

	storeMu sync.Mutex
}

func (s *Service) conn(key, owner string, personal bool) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey(key, owner)
	c := s.conns[k]
	if c == nil {
		c = &conn{key: key, owner: owner, personal: personal}
		s.conns[k] = c
	}
	return c
}

// value is the header value.
func (t *accessToken) value() string { return t.tokenType + " " + t.access }

// valueHash is the hex SHA-256 of a header value.
func valueHash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// token returns a usable access token for srv: the one in memory, a peer's
// stored one, or a new one. Concurrent callers for one connection share one
// acquisition; it runs on the service's context, so a caller that gives up
// never abandons a refresh halfway. With force, the token whose header
// value hashes to rejectedHash (the current one when rejectedHash is "") is
// not handed out again.
func (s *Service) token(ctx context.Context, srv *config.Server, owner string, force bool, rejectedHash string) (*accessToken, error) {
	return s.tokenFor(ctx, srv, s.conn(srv.Name, owner, owner != ""), force, rejectedHash)
}

// tokenFor is token for the connection c (its row key and owner).
func (s *Service) tokenFor(ctx context.Context, srv *config.Server, c *conn, force bool, rejectedHash string) (*accessToken, error) {
	o := srv.OAuth
	fp, shape := chainFingerprint(o), requestShape(o)
	skew := time.Duration(max(o.RefreshSkewSeconds, 0)) * time.Second
	owner := c.owner

	c.mu.Lock()
	if c.tok.usable(fp, shape, s.deps.Clock(), skew) && (!force || (rejectedHash != "" && valueHash(c.tok.value()) != rejectedHash)) {
		tok := c.tok
		c.mu.Unlock()
		return tok, nil
	}
	rejected := ""
	if force {
		rejected = rejectedHash
		if rejected == "" && c.tok != nil {
			rejected = valueHash(c.tok.value())
		}
	}
	key := memKey(c.key, owner)
	// The refresh joins the trace of the request that started it.
	f, _ := s.flights.Start(tracing.WithSpanOf(s.base, ctx), key, func(base context.Context, _ func() bool) (*accessToken, error) {
		tok, err := s.acquire(base, c, srv, fp, shape, skew, rejected)
		// The token and the end of the flight together: a caller that
		// finds neither starts the next acquisition.
		c.mu.Lock()
		if tok != nil {
			c.tok = tok
		}
		s.flights.Forget(key)
		c.mu.Unlock()
		return tok, err
	})
	c.mu.Unlock()
	tok, err := f.Wait(ctx)
	if flight.WaitEnded(err) {
		return nil, bus.Errorf(bus.CodeUpstreamTimeout, "MCP server '%s': timed out waiting for an OAuth access token", srv.Name)
	}
	return tok, err
}

// acquire obtains a token for one flight, on base (the service's lifetime
// carrying the starting request's span).
func (s *Service) acquire(base context.Context, c *conn, srv *config.Server, fp, shape string, skew time.Duration, rejected string) (*accessToken, error) {
	ctx, cancel := context.WithTimeout(base, s.cfg.AbandonAfter+2*s.cfg.LeaseTTL)
	defer cancel()
	o := srv.OAuth
	if o.GrantType != config.GrantRefreshToken || !s.persistent() {
		return s.acquireInMemory(ctx, c, srv, fp, shape)
	}
	if err := s.flushPending(ctx, c); err != nil {
		return nil, s.storeError(srv, "cannot store the tokens of the previous refresh", err)
	}
	for {
		row, err := s.readRow(ctx, c.key)
		if err != nil {
			return nil, s.storeError(srv, "cannot read the token store", err)
		}
		if tok := s.reusable(c, row, fp, shape, skew, rejected); tok != nil {
			return tok, nil
		}
		claimed, err := s.deps.Tokens.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: c.key, Owner: s.deps.InstanceID, TTL: s.cfg.LeaseTTL})
		if err != nil {
			return nil, s.storeError(srv, "cannot claim the refresh lease", err)
		}
		if claimed {
			// Re-read: a peer may have finished between our read and our claim.
			row, err := s.readRow(ctx, c.key)
			if err != nil {
				s.release(c.key)
				return nil, s.storeError(srv, "cannot read the token store", err)
			}
			if tok := s.reusable(c, row, fp, shape, skew, rejected); tok != nil {
				s.release(c.key)
				return tok, nil
			}
			return s.refreshUnderLease(ctx, c, srv, row, fp, shape)
		}
		// Another replica holds the lease: wait for its result.
		s.deps.Metrics.LeaseWaits.WithLabelValues(serverLabel(srv, c.owner)).Inc()
		select {
		case <-ctx.Done():
			return nil, bus.Errorf(bus.CodeUpstreamTimeout, "MCP server '%s': timed out waiting for another replica's OAuth token refresh", srv.Name)
		case <-time.After(s.cfg.PollInterval):
		}
	}
}

// acquireInMemory serves client_credentials, and refresh_token chains that
// are not stored (memory backend or no credentials key).
func (s *Service) acquireInMemory(ctx context.Context, c *conn, srv *config.Server, fp, shape string) (*accessToken, error) {
	o := srv.OAuth
	rt := ""
	if o.GrantType == config.GrantRefreshToken {
		c.mu.Lock()
		rt = o.RefreshToken
		if c.memFP == fp && c.memRT != "" {
			rt = c.memRT
		}
		c.mu.Unlock()
	}
	reqCtx, cancel := context.WithTimeout(ctx, s.cfg.AbandonAfter)
	defer cancel()
	res, err := s.exchange(reqCtx, srv, c, rt)
	if err != nil {
		return nil, s.grantError(srv, err, rt, false)
	}
	if o.GrantType == config.GrantRefreshToken && res.RefreshToken != "" {
		c.mu.Lock()
		c.memRT, c.memFP = res.RefreshToken, fp
		c.mu.Unlock()
	}
	return s.newAccessToken(res, fp, shape), nil
}

func (s *Service) newAccessToken(res *grantResult, fp, shape string) *accessToken {
	return &accessToken{
		access: res.AccessToken, tokenType: res.TokenType,
		expiresAt:   s.deps.Clock().Add(time.Duration(res.ExpiresIn) * time.Second).UTC(),
		fingerprint: fp, shape: shape,
	}
}

// exchange makes one token request and checks that the result can travel
// as a header value. The token_url of a personal connection goes through
// the egress policy.
func (s *Service) exchange(ctx context.Context, srv *config.Server, c *conn, refreshToken string) (_ *grantResult, err error) {
	owner := c.owner
	ctx, span := tracing.Start(ctx, grantSpanName(srv.OAuth.GrantType), tracing.Server(srv.Name), tracing.KeyGrantType.String(srv.OAuth.GrantType))
	defer func() { tracing.End(span, err, oauthOutcome(err)) }()
	form, err := tokenForm(srv.OAuth, refreshToken)
	if err != nil {
		return nil, err
	}
	hc := s.http
	if c.personal {
		if err := s.egress.CheckURL(srv.OAuth.TokenURL); err != nil {
			return nil, configError("token_url " + cmp.Or(bus.UserMessage(err), "refused by the egress policy"))
		}
		hc = s.personalHTTP
	}
	res, err := requestToken(ctx, hc, srv.OAuth, form)
	s.countRefresh(srv, owner, err)
	if err != nil {
		return nil, err
	}
	if reason := headers.Check(res.TokenType + " " + res.AccessToken); reason != "" {
		return nil, fmt.Errorf("the token endpoint returned a token that cannot be sent as an HTTP header value: it %s", reason)
	}
	return res, nil
}

// readRow returns the row or nil when there is none.
func (s *Service) readRow(ctx context.Context, key string) (*store.OAuthToken, error) {
	row, err := s.deps.Tokens.GetToken(ctx, store.GetTokenParams{Key: key})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return row, err
}

// reusable returns the row's access token when it belongs to this chain and
// request shape, opens with this key, is not about to expire and is not the
// token the caller was refused with (rejected: hash of its header value).
func (s *Service) reusable(c *conn, row *store.OAuthToken, fp, shape string, skew time.Duration, rejected string) *accessToken {
	if row == nil || row.OwnerUserID != c.owner || row.Fingerprint != fp || row.RequestShapeHash != shape || len(row.AccessTokenEnc) == 0 || row.ExpiresAt == nil {
		return nil
	}
	if !row.ExpiresAt.Add(-skew).After(s.deps.Clock()) {
		return nil
	}
	at, err := s.deps.Sealer.Open(row.AccessTokenEnc, adAccess(c.key))
	if err != nil {
		return nil
	}
	tok := &accessToken{access: string(at), tokenType: row.TokenType, expiresAt: row.ExpiresAt.UTC(), fingerprint: fp, shape: shape}
	if rejected != "" && valueHash(tok.value()) == rejected {
		return nil
	}
	return tok
}

// refreshUnderLease spends the chain's refresh token while holding the
// lease, renewing it as the request runs, and stores the result.
func (s *Service) refreshUnderLease(ctx context.Context, c *conn, srv *config.Server, row *store.OAuthToken, fp, shape string) (*accessToken, error) {
	o := srv.OAuth
	rt, fellBack := o.RefreshToken, false
	if row != nil && row.OwnerUserID == c.owner && row.Fingerprint == fp && len(row.RefreshTokenEnc) > 0 {
		b, err := s.deps.Sealer.Open(row.RefreshTokenEnc, adRefresh(c.key))
		if err != nil {
			fellBack = true
			s.log.WarnContext(ctx, "the stored refresh-token chain does not open with this instance's credentials key; starting again from the configured refresh_token",
				observability.Server(srv.Name))
		} else {
			rt = string(b)
		}
	}
	reqCtx, cancel := context.WithTimeout(ctx, s.cfg.AbandonAfter)
	stopRenew := s.renewWhile(reqCtx, c.key, srv.Name)
	res, err := s.exchange(reqCtx, srv, c, rt)
	stopRenew()
	cancel()
	if err != nil {
		s.release(c.key)
		return nil, s.grantError(srv, err, rt, fellBack)
	}
	newRT := res.RefreshToken
	if newRT == "" {
		newRT = rt
	}
	tok := s.newAccessToken(res, fp, shape)
	rowOut, err := s.sealRow(c.key, c.owner, tok, newRT)
	if err != nil {
		s.release(c.key)
		return nil, bus.Wrap(bus.CodeInternal, err, "cannot encrypt the new tokens")
	}
	s.log.InfoContext(ctx, "refreshed an OAuth access token", observability.Server(srv.Name), "rotated", res.RefreshToken != "" && res.RefreshToken != rt, "expires_at", tok.expiresAt)
	if isConnectedAccount(c.key) {
		s.audit(ctx, c.owner, srv.Name, actionRefresh, "ok")
	}
	c.storeMu.Lock()
	putCtx, putCancel := context.WithTimeout(s.base, 10*time.Second)
	_, err = s.deps.Tokens.PutToken(putCtx, store.PutTokenParams{Token: *rowOut})
	putCancel()
	if err != nil {
		c.mu.Lock()
		c.pending = rowOut
		startRetry := !c.retry
		c.retry = true
		c.mu.Unlock()
		c.storeMu.Unlock()
		s.log.WarnContext(ctx, "cannot store the new OAuth tokens; using them from memory and storing them again every few seconds", observability.Server(srv.Name), observability.Err(err))
		if startRetry {
			s.bg.Add(1)
			go s.retryStore(c, srv.Name)
		}
		return tok, nil // keep the lease until stored: peers must not spend the old refresh token
	}
	c.storeMu.Unlock()
	s.release(c.key)
	return tok, nil
}

func (s *Service) sealRow(key, owner string, tok *accessToken, refreshToken string) (*store.OAuthToken, error) {
	atEnc, err := s.deps.Sealer.Seal([]byte(tok.access), adAccess(key))
	if err != nil {
		return nil, err
	}
	rtEnc, err := s.deps.Sealer.Seal([]byte(refreshToken), adRefresh(key))
	if err != nil {
		return nil, err
	}
	exp := tok.expiresAt
	return &store.OAuthToken{
		ConnectionKey: key, OwnerUserID: owner, Fingerprint: tok.fingerprint, RequestShapeHash: tok.shape,
		AccessTokenEnc: atEnc, RefreshTokenEnc: rtEnc, TokenType: tok.tokenType, ExpiresAt: &exp,
	}, nil
}

// renewWhile renews the lease every third of its TTL until the returned
// stop is called.
func (s *Service) renewWhile(ctx context.Context, key, server string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL/3)
				err := s.deps.Tokens.RenewRefreshLease(rctx, store.RefreshLeaseParams{Key: key, Owner: s.deps.InstanceID, TTL: s.cfg.LeaseTTL})
				cancel()
				if err != nil {
					s.log.Warn("cannot renew the refresh lease while the token request runs", observability.Server(server), observability.Err(err))
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// release gives the lease back (best effort: it expires anyway).
func (s *Service) release(key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), 5*time.Second)
	defer cancel()
	if err := s.deps.Tokens.ReleaseRefreshLease(ctx, store.RefreshLeaseParams{Key: key, Owner: s.deps.InstanceID}); err != nil {
		s.log.Warn("cannot release the refresh lease", "connection", key, observability.Err(err))
	}
}

// flushPending stores tokens a previous refresh could not store, then
// releases the lease it kept. nil when nothing is pending.
func (s *Service) flushPending(ctx context.Context, c *conn) error {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	c.mu.Lock()
	p := c.pending
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	if _, err := s.deps.Tokens.PutToken(ctx, store.PutTokenParams{Token: *p}); err != nil {
		return err
	}
	c.mu.Lock()
	if c.pending == p {
		c.pending = nil
	}
	c.mu.Unlock()
	s.release(c.key)
	return nil
}

// retryStore stores the pending row every StoreRetryInterval until it is
// stored or the service stops.
func (s *Service) retryStore(c *conn, server string) {
	defer s.bg.Done()
	t := time.NewTicker(s.cfg.StoreRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-s.base.Done():
			// Stopping: one last attempt, or the chain in the database stays
			// behind the refresh token this process already spent.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := s.flushPending(ctx, c)
			cancel()
			c.mu.Lock()
			c.retry = false
			lost := c.pending != nil
			c.mu.Unlock()
			if lost {
				s.log.Error("stopping with OAuth tokens that could not be stored; the next refresh of this server will need a new refresh_token", observability.Server(server), observability.Err(err))
			}
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
		err := s.flushPending(ctx, c)
		cancel()
		c.mu.Lock()
		done := c.pending == nil
		if done {
			c.retry = false
		}
		c.mu.Unlock()
		if done {
			s.log.Info("stored the OAuth tokens that could not be stored before", observability.Server(server))
			return
		}
		s.log.Warn("still cannot store the new OAuth tokens", observability.Server(server), observability.Err(err))
	}
}
