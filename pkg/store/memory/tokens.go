package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

type tokenStore struct {
	now  func() time.Time
	mu   sync.Mutex
	rows map[string]store.OAuthToken
}

var _ store.TokenStore = (*tokenStore)(nil)

func cloneToken(t store.OAuthToken) store.OAuthToken {
	t.AccessTokenEnc, t.RefreshTokenEnc = cloneBytes(t.AccessTokenEnc), cloneBytes(t.RefreshTokenEnc)
	t.ExpiresAt, t.LeaseExpiresAt = cloneTime(t.ExpiresAt), cloneTime(t.LeaseExpiresAt)
	return t
}

func (s *tokenStore) GetToken(_ context.Context, key string) (*store.OAuthToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.rows[key]
	if !ok {
		return nil, fmt.Errorf("store: memory: get token: %w", store.ErrNotFound)
	}
	t = cloneToken(t)
	return &t, nil
}

func (s *tokenStore) PutToken(_ context.Context, t *store.OAuthToken) error {
	if err := t.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row := cloneToken(*t)
	if old, ok := s.rows[t.ConnectionKey]; ok {
		row.LeaseOwner, row.LeaseExpiresAt = old.LeaseOwner, old.LeaseExpiresAt
	} else {
		row.LeaseOwner, row.LeaseExpiresAt = "", nil
	}
	row.UpdatedAt = s.now()
	s.rows[t.ConnectionKey] = row
	*t = cloneToken(row)
	return nil
}

func (s *tokenStore) ClaimRefreshLease(_ context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := store.ValidateLease(key, owner, ttl); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	row, ok := s.rows[key]
	if !ok {
		row = store.OAuthToken{ConnectionKey: key, UpdatedAt: now}
	}
	free := row.LeaseOwner == "" || row.LeaseExpiresAt == nil || !row.LeaseExpiresAt.After(now)
	if !free && row.LeaseOwner != owner {
		return false, nil
	}
	exp := now.Add(ttl)
	row.LeaseOwner, row.LeaseExpiresAt = owner, &exp
	s.rows[key] = row
	return true, nil
}

func (s *tokenStore) RenewRefreshLease(_ context.Context, key, owner string, ttl time.Duration) error {
	if err := store.ValidateLease(key, owner, ttl); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	row, ok := s.rows[key]
	if !ok || row.LeaseOwner != owner || row.LeaseExpiresAt == nil || !row.LeaseExpiresAt.After(now) {
		return fmt.Errorf("store: memory: renew refresh lease %s as %s: %w", key, owner, store.ErrLeaseLost)
	}
	exp := now.Add(ttl)
	row.LeaseExpiresAt = &exp
	s.rows[key] = row
	return nil
}

func (s *tokenStore) ReleaseRefreshLease(_ context.Context, key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if row, ok := s.rows[key]; ok && row.LeaseOwner == owner {
		row.LeaseOwner, row.LeaseExpiresAt = "", nil
		s.rows[key] = row
	}
	return nil
}

func (s *tokenStore) DeleteToken(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rows, key)
	return nil
}
