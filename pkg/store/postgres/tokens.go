package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

const getTokenSQL = `SELECT ` + sqlschema.TokenColumns + ` FROM mcp_oauth_tokens WHERE connection_key = $1`

const putTokenSQL = `
INSERT INTO mcp_oauth_tokens (connection_key, owner_user_id, fingerprint, request_shape_hash,
	access_token_enc, refresh_token_enc, token_type, expires_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now())
ON CONFLICT (connection_key) DO UPDATE SET
	owner_user_id = EXCLUDED.owner_user_id,
	fingerprint = EXCLUDED.fingerprint,
	request_shape_hash = EXCLUDED.request_shape_hash,
	access_token_enc = EXCLUDED.access_token_enc,
	refresh_token_enc = EXCLUDED.refresh_token_enc,
	token_type = EXCLUDED.token_type,
	expires_at = EXCLUDED.expires_at,
	updated_at = EXCLUDED.updated_at
RETURNING ` + sqlschema.TokenColumns

// claimLeaseSQL: $1 key, $2 owner, $3 ttl in microseconds. It returns a row
// only when the lease was taken.
const claimLeaseSQL = `
INSERT INTO mcp_oauth_tokens AS t (connection_key, lease_owner, lease_expires_at, updated_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond', now())
ON CONFLICT (connection_key) DO UPDATE SET
	lease_owner = EXCLUDED.lease_owner,
	lease_expires_at = EXCLUDED.lease_expires_at
WHERE t.lease_owner IS NULL
	OR t.lease_expires_at IS NULL
	OR t.lease_expires_at <= now()
	OR t.lease_owner = EXCLUDED.lease_owner
RETURNING connection_key`

const renewLeaseSQL = `
UPDATE mcp_oauth_tokens SET lease_expires_at = now() + $3::bigint * interval '1 microsecond'
WHERE connection_key = $1 AND lease_owner = $2 AND lease_expires_at > now()`

const releaseLeaseSQL = `
UPDATE mcp_oauth_tokens SET lease_owner = NULL, lease_expires_at = NULL
WHERE connection_key = $1 AND lease_owner = $2`

const deleteTokenSQL = `DELETE FROM mcp_oauth_tokens WHERE connection_key = $1`

type tokenStore struct {
	pool *pgxpool.Pool
}

var _ store.TokenStore = (*tokenStore)(nil)

func (s *tokenStore) GetToken(ctx context.Context, key string) (*store.OAuthToken, error) {
	t, err := collectOneToken(s.pool.Query(ctx, getTokenSQL, key))
	if err != nil {
		return nil, translate("get token", err)
	}
	return &t, nil
}

func (s *tokenStore) PutToken(ctx context.Context, t *store.OAuthToken) error {
	if err := t.Validate(); err != nil {
		return err
	}
	got, err := collectOneToken(s.pool.Query(ctx, putTokenSQL,
		t.ConnectionKey, nullText(t.OwnerUserID), nullText(t.Fingerprint), nullText(t.RequestShapeHash),
		t.AccessTokenEnc, t.RefreshTokenEnc, nullText(t.TokenType), t.ExpiresAt))
	if err != nil {
		return translate("put token", err)
	}
	*t = got
	return nil
}

func (s *tokenStore) ClaimRefreshLease(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := store.ValidateLease(key, owner, ttl); err != nil {
		return false, err
	}
	var got string
	err := s.pool.QueryRow(ctx, claimLeaseSQL, key, owner, ttl.Microseconds()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, translate("claim refresh lease", err)
	}
	return true, nil
}

func (s *tokenStore) RenewRefreshLease(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := store.ValidateLease(key, owner, ttl); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, renewLeaseSQL, key, owner, ttl.Microseconds())
	if err != nil {
		return translate("renew refresh lease", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: postgres: renew refresh lease %s as %s: %w", key, owner, store.ErrLeaseLost)
	}
	return nil
}

func (s *tokenStore) ReleaseRefreshLease(ctx context.Context, key, owner string) error {
	if _, err := s.pool.Exec(ctx, releaseLeaseSQL, key, owner); err != nil {
		return translate("release refresh lease", err)
	}
	return nil
}

func (s *tokenStore) DeleteToken(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, deleteTokenSQL, key); err != nil {
		return translate("delete token", err)
	}
	return nil
}

func scanToken(row pgx.CollectableRow) (store.OAuthToken, error) {
	var (
		t                                                store.OAuthToken
		owner, fingerprint, shape, tokenType, leaseOwner *string
	)
	err := row.Scan(&t.ConnectionKey, &owner, &fingerprint, &shape,
		&t.AccessTokenEnc, &t.RefreshTokenEnc, &tokenType, &t.ExpiresAt,
		&leaseOwner, &t.LeaseExpiresAt, &t.UpdatedAt)
	if err != nil {
		return store.OAuthToken{}, err
	}
	t.OwnerUserID, t.Fingerprint, t.RequestShapeHash = deref(owner), deref(fingerprint), deref(shape)
	t.TokenType, t.LeaseOwner = deref(tokenType), deref(leaseOwner)
	t.ExpiresAt, t.LeaseExpiresAt, t.UpdatedAt = utcPtr(t.ExpiresAt), utcPtr(t.LeaseExpiresAt), t.UpdatedAt.UTC()
	return t, nil
}

func collectOneToken(rows pgx.Rows, err error) (store.OAuthToken, error) {
	if err != nil {
		return store.OAuthToken{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanToken)
}
