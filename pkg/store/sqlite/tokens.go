package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

const getTokenSQL = `SELECT ` + sqlschema.TokenColumns + ` FROM mcp_oauth_tokens WHERE connection_key = $1`

const putTokenSQL = `
INSERT INTO mcp_oauth_tokens (connection_key, owner_user_id, fingerprint, request_shape_hash,
	access_token_enc, refresh_token_enc, token_type, expires_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, ` + nowMS + `)
ON CONFLICT (connection_key) DO UPDATE SET
	owner_user_id = excluded.owner_user_id,
	fingerprint = excluded.fingerprint,
	request_shape_hash = excluded.request_shape_hash,
	access_token_enc = excluded.access_token_enc,
	refresh_token_enc = excluded.refresh_token_enc,
	token_type = excluded.token_type,
	expires_at = excluded.expires_at,
	updated_at = excluded.updated_at
RETURNING ` + sqlschema.TokenColumns

// claimLeaseSQL: $1 key, $2 owner, $3 ttl in milliseconds. It returns a row
// only when the lease was taken.
const claimLeaseSQL = `
INSERT INTO mcp_oauth_tokens AS t (connection_key, lease_owner, lease_expires_at, updated_at)
VALUES ($1, $2, ` + nowMS + ` + $3, ` + nowMS + `)
ON CONFLICT (connection_key) DO UPDATE SET
	lease_owner = excluded.lease_owner,
	lease_expires_at = excluded.lease_expires_at
WHERE t.lease_owner IS NULL
	OR t.lease_expires_at IS NULL
	OR t.lease_expires_at <= ` + nowMS + `
	OR t.lease_owner = excluded.lease_owner
RETURNING connection_key`

const renewLeaseSQL = `
UPDATE mcp_oauth_tokens SET lease_expires_at = ` + nowMS + ` + $3
WHERE connection_key = $1 AND lease_owner = $2 AND lease_expires_at > ` + nowMS

const releaseLeaseSQL = `
UPDATE mcp_oauth_tokens SET lease_owner = NULL, lease_expires_at = NULL
WHERE connection_key = $1 AND lease_owner = $2`

const deleteTokenSQL = `DELETE FROM mcp_oauth_tokens WHERE connection_key = $1`

type tokenStore struct {
	db *sql.DB
}

var _ store.TokenStore = (*tokenStore)(nil)

func (s *tokenStore) GetToken(ctx context.Context, key string) (*store.OAuthToken, error) {
	t, err := queryOneToken(ctx, s.db, getTokenSQL, key)
	if err != nil {
		return nil, translate("get token", err)
	}
	return &t, nil
}

func (s *tokenStore) PutToken(ctx context.Context, t *store.OAuthToken) error {
	if err := t.Validate(); err != nil {
		return err
	}
	got, err := queryOneToken(ctx, s.db, putTokenSQL,
		t.ConnectionKey, nullText(t.OwnerUserID), nullText(t.Fingerprint), nullText(t.RequestShapeHash),
		nullBlob(t.AccessTokenEnc), nullBlob(t.RefreshTokenEnc), nullText(t.TokenType), millis(t.ExpiresAt))
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
	rows, err := s.db.QueryContext(ctx, claimLeaseSQL, key, owner, ttl.Milliseconds())
	if err != nil {
		return false, translate("claim refresh lease", err)
	}
	defer rows.Close()
	claimed := false
	for rows.Next() {
		claimed = true
	}
	if err := rows.Err(); err != nil {
		return false, translate("claim refresh lease", err)
	}
	return claimed, nil
}

func (s *tokenStore) RenewRefreshLease(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := store.ValidateLease(key, owner, ttl); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, renewLeaseSQL, key, owner, ttl.Milliseconds())
	if err != nil {
		return translate("renew refresh lease", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return translate("renew refresh lease", err)
	}
	if n == 0 {
		return fmt.Errorf("store: sqlite: renew refresh lease %s as %s: %w", key, owner, store.ErrLeaseLost)
	}
	return nil
}

func (s *tokenStore) ReleaseRefreshLease(ctx context.Context, key, owner string) error {
	if _, err := s.db.ExecContext(ctx, releaseLeaseSQL, key, owner); err != nil {
		return translate("release refresh lease", err)
	}
	return nil
}

func (s *tokenStore) DeleteToken(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, deleteTokenSQL, key); err != nil {
		return translate("delete token", err)
	}
	return nil
}

func queryOneToken(ctx context.Context, q querier, query string, args ...any) (store.OAuthToken, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return store.OAuthToken{}, err
	}
	defer rows.Close()
	var (
		t       store.OAuthToken
		found   bool
		scanErr error
	)
	for rows.Next() {
		if found {
			continue
		}
		found = true
		var (
			owner, fingerprint, shape, tokenType, leaseOwner sql.NullString
			access, refresh                                  []byte
			expires, leaseExp                                sql.NullInt64
			updated                                          int64
		)
		scanErr = rows.Scan(&t.ConnectionKey, &owner, &fingerprint, &shape, &access, &refresh,
			&tokenType, &expires, &leaseOwner, &leaseExp, &updated)
		t.OwnerUserID, t.Fingerprint, t.RequestShapeHash = owner.String, fingerprint.String, shape.String
		t.AccessTokenEnc, t.RefreshTokenEnc = access, refresh
		t.TokenType, t.LeaseOwner = tokenType.String, leaseOwner.String
		t.ExpiresAt, t.LeaseExpiresAt, t.UpdatedAt = timePtr(expires), timePtr(leaseExp), fromMillis(updated)
	}
	if err := rows.Err(); err != nil {
		return store.OAuthToken{}, err
	}
	if scanErr != nil {
		return store.OAuthToken{}, scanErr
	}
	if !found {
		return store.OAuthToken{}, sql.ErrNoRows
	}
	return t, nil
}
