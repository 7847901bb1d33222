package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// ExerciseTokens checks every TokenStore method.
func ExerciseTokens(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.TokenStore)
	}{
		{"PutGetDelete", testTokenPutGetDelete},
		{"LeaseCompareAndSet", testTokenLeaseCAS},
		{"LeaseExpiry", testTokenLeaseExpiry},
		{"LeaseConcurrent", testTokenLeaseConcurrent},
		{"Now", testTokenNow},
		{"Invalid", testTokenInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t).Tokens())
		})
	}
}

func getToken(t *testing.T, s store.TokenStore, key string) *store.OAuthToken {
	t.Helper()
	got, err := s.GetToken(t.Context(), store.GetTokenParams{Key: key})
	must(t, "GetToken "+key, err)
	return got
}

func sameToken(t *testing.T, what string, got, want store.OAuthToken) {
	t.Helper()
	// bytes.Equal treats nil and empty alike, as every backend may.
	if !bytes.Equal(got.AccessTokenEnc, want.AccessTokenEnc) || !bytes.Equal(got.RefreshTokenEnc, want.RefreshTokenEnc) {
		t.Fatalf("%s: tokens %x/%x, want %x/%x", what, got.AccessTokenEnc, got.RefreshTokenEnc,
			want.AccessTokenEnc, want.RefreshTokenEnc)
	}
	got.AccessTokenEnc, got.RefreshTokenEnc, want.AccessTokenEnc, want.RefreshTokenEnc = nil, nil, nil, nil
	if g, w := render(got), render(want); g != w {
		t.Fatalf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

func testTokenPutGetDelete(t *testing.T, s store.TokenStore) {
	ctx := t.Context()
	now := time.Now()
	_, err := s.GetToken(ctx, store.GetTokenParams{Key: "srv"})
	wantErr(t, "GetToken of a missing key", err, store.ErrNotFound)

	tok := &store.OAuthToken{
		ConnectionKey:    "srv",
		OwnerUserID:      "u1",
		Fingerprint:      strings.Repeat("a", 64),
		RequestShapeHash: "shape",
		AccessTokenEnc:   []byte{0, 1, 2, 255},
		RefreshTokenEnc:  []byte("refresh-ciphertext"),
		TokenType:        "Bearer",
		ExpiresAt:        ptr(now.Add(time.Hour)),
	}
	want := *tok
	must(t, "PutToken", putToken(ctx, s, tok))
	near(t, "updated_at", tok.UpdatedAt, now, time.Minute)
	want.UpdatedAt = tok.UpdatedAt
	sameToken(t, "PutToken result", *tok, want)
	sameToken(t, "GetToken", *getToken(t, s, "srv"), want)

	// Upsert: every token field is replaced.
	rotated := &store.OAuthToken{
		ConnectionKey:   "srv",
		Fingerprint:     strings.Repeat("b", 64),
		RefreshTokenEnc: []byte("rotated"),
	}
	want2 := *rotated
	must(t, "PutToken again", putToken(ctx, s, rotated))
	want2.UpdatedAt = rotated.UpdatedAt
	sameToken(t, "GetToken after the upsert", *getToken(t, s, "srv"), want2)
	if rotated.UpdatedAt.Before(tok.UpdatedAt) {
		t.Errorf("updated_at went backwards: %v < %v", rotated.UpdatedAt, tok.UpdatedAt)
	}

	must(t, "DeleteToken", s.DeleteToken(ctx, store.DeleteTokenParams{Key: "srv"}))
	_, err = s.GetToken(ctx, store.GetTokenParams{Key: "srv"})
	wantErr(t, "GetToken after DeleteToken", err, store.ErrNotFound)
	must(t, "DeleteToken of a missing key", s.DeleteToken(ctx, store.DeleteTokenParams{Key: "srv"}))
}

func testTokenLeaseCAS(t *testing.T, s store.TokenStore) {
	ctx := t.Context()
	now := time.Now()
	claim := func(owner string, want bool) {
		t.Helper()
		ok, err := s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: owner, TTL: time.Minute})
		must(t, "ClaimRefreshLease by "+owner, err)
		if ok != want {
			t.Fatalf("ClaimRefreshLease by %s = %v, want %v", owner, ok, want)
		}
	}

	// A claim creates the missing row, with the lease and no tokens.
	claim("a", true)
	row := getToken(t, s, "srv")
	if row.LeaseOwner != "a" || row.LeaseExpiresAt == nil || len(row.RefreshTokenEnc) != 0 {
		t.Fatalf("row created by the claim: %s", render(row))
	}
	near(t, "lease_expires_at", *row.LeaseExpiresAt, now.Add(time.Minute), 30*time.Second)

	claim("b", false) // held by a
	claim("a", true)  // already ours: extended
	must(t, "RenewRefreshLease by a", s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a", TTL: 2 * time.Minute}))
	if got := getToken(t, s, "srv"); !got.LeaseExpiresAt.After(now.Add(90 * time.Second)) {
		t.Fatalf("renewed lease ends at %v, want about %v", got.LeaseExpiresAt, now.Add(2*time.Minute))
	}
	wantErr(t, "RenewRefreshLease by b", s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "b", TTL: time.Minute}), store.ErrLeaseLost)
	wantErr(t, "RenewRefreshLease of a missing key",
		s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "missing", Owner: "a", TTL: time.Minute}), store.ErrLeaseLost)

	// PutToken keeps the lease.
	must(t, "PutToken under the lease", putToken(ctx, s, &store.OAuthToken{
		ConnectionKey: "srv", RefreshTokenEnc: []byte("new"),
	}))
	if got := getToken(t, s, "srv"); got.LeaseOwner != "a" || got.LeaseExpiresAt == nil ||
		string(got.RefreshTokenEnc) != "new" {
		t.Fatalf("after PutToken: %s", render(got))
	}

	// Releasing someone else's lease does nothing.
	must(t, "ReleaseRefreshLease by b", s.ReleaseRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "b"}))
	claim("b", false)

	must(t, "ReleaseRefreshLease by a", s.ReleaseRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a"}))
	if got := getToken(t, s, "srv"); got.LeaseOwner != "" || got.LeaseExpiresAt != nil ||
		string(got.RefreshTokenEnc) != "new" {
		t.Fatalf("after release: %s", render(got))
	}
	must(t, "ReleaseRefreshLease again", s.ReleaseRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a"}))
	must(t, "ReleaseRefreshLease of a missing key", s.ReleaseRefreshLease(ctx, store.RefreshLeaseParams{Key: "missing", Owner: "a"}))
	claim("b", true)
	wantErr(t, "RenewRefreshLease by a after b claimed",
		s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a", TTL: time.Minute}), store.ErrLeaseLost)
}

func testTokenLeaseExpiry(t *testing.T, s store.TokenStore) {
	ctx := t.Context()
	ok, err := s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a", TTL: time.Minute, Now: ago(2 * time.Minute)}) // a crashed holder: expired a minute ago
	must(t, "ClaimRefreshLease by a", err)
	if !ok {
		t.Fatal("ClaimRefreshLease by a = false on a missing row")
	}
	wantErr(t, "RenewRefreshLease of an expired lease",
		s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a", TTL: time.Minute}), store.ErrLeaseLost)
	ok, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "b", TTL: time.Minute})
	must(t, "ClaimRefreshLease by b", err)
	if !ok {
		t.Fatal("ClaimRefreshLease by b = false although a's lease expired")
	}
	if got := getToken(t, s, "srv"); got.LeaseOwner != "b" {
		t.Fatalf("lease owner %q, want b", got.LeaseOwner)
	}
	// An expired lease of our own can be claimed again.
	_, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "other", Owner: "c", TTL: time.Minute, Now: ago(2 * time.Minute)})
	must(t, "ClaimRefreshLease by c", err)
	ok, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "other", Owner: "c", TTL: time.Minute})
	must(t, "ClaimRefreshLease by c again", err)
	if !ok {
		t.Fatal("reclaiming an own expired lease failed")
	}
}

func testTokenLeaseConcurrent(t *testing.T, s store.TokenStore) {
	const claimers = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		won   atomic.Int32
		errs  = make([]error, claimers)
	)
	for i := range claimers {
		wg.Go(func() {
			<-start
			ok, err := s.ClaimRefreshLease(t.Context(), store.RefreshLeaseParams{Key: "srv", Owner: fmt.Sprintf("replica-%d", i), TTL: time.Minute})
			errs[i] = err
			if ok {
				won.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("claimer %d", i), err)
	}
	if n := won.Load(); n != 1 {
		t.Fatalf("%d concurrent claimers won the lease, want exactly 1", n)
	}
}

// testTokenNow: the Now parameter replaces the database clock in what the
// token statements write and compare.
func testTokenNow(t *testing.T, s store.TokenStore) {
	ctx := t.Context()
	at := ms(time.Now().Add(-time.Hour))
	tok := &store.OAuthToken{ConnectionKey: "srv", RefreshTokenEnc: []byte("r")}
	got, err := s.PutToken(ctx, store.PutTokenParams{Token: *tok, Now: &at})
	must(t, "PutToken at a fixed time", err)
	if !got.UpdatedAt.Equal(at) {
		t.Fatalf("updated_at = %v, want the Now parameter %v", got.UpdatedAt, at)
	}
	ok, err := s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a", TTL: time.Minute, Now: &at})
	must(t, "ClaimRefreshLease at a fixed time", err)
	if !ok {
		t.Fatal("ClaimRefreshLease at a fixed time = false on a free lease")
	}
	if row := getToken(t, s, "srv"); row.LeaseExpiresAt == nil || !row.LeaseExpiresAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("lease_expires_at = %v, want Now + TTL = %v", row.LeaseExpiresAt, at.Add(time.Minute))
	}
	// At the lease's last instant it is still live; from its expiry on, free.
	last := at.Add(time.Minute - time.Millisecond)
	ok, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "b", TTL: time.Minute, Now: &last})
	must(t, "ClaimRefreshLease by b before the expiry", err)
	if ok {
		t.Fatal("b claimed a's lease before it expired")
	}
	expiry := at.Add(time.Minute)
	ok, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "b", TTL: time.Minute, Now: &expiry})
	must(t, "ClaimRefreshLease by b at the expiry", err)
	if !ok {
		t.Fatal("b could not claim a's lease at its expiry")
	}
	wantErr(t, "RenewRefreshLease by a after b claimed",
		s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "srv", Owner: "a", TTL: time.Minute, Now: &expiry}), store.ErrLeaseLost)
}

func testTokenInvalid(t *testing.T, s store.TokenStore) {
	ctx := t.Context()
	wantErr(t, "PutToken without a key", putToken(ctx, s, &store.OAuthToken{}), store.ErrInvalid)
	wantErr(t, "PutToken with a short fingerprint",
		putToken(ctx, s, &store.OAuthToken{ConnectionKey: "k", Fingerprint: "abc"}), store.ErrInvalid)
	_, err := s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "k", Owner: "a", TTL: 0})
	wantErr(t, "ClaimRefreshLease with a zero ttl", err, store.ErrInvalid)
	_, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "k", Owner: "", TTL: time.Minute})
	wantErr(t, "ClaimRefreshLease without an owner", err, store.ErrInvalid)
	_, err = s.ClaimRefreshLease(ctx, store.RefreshLeaseParams{Key: "k", Owner: "a", TTL: -time.Minute})
	wantErr(t, "ClaimRefreshLease with a negative ttl", err, store.ErrInvalid)
	wantErr(t, "RenewRefreshLease with a zero ttl", s.RenewRefreshLease(ctx, store.RefreshLeaseParams{Key: "k", Owner: "a", TTL: 0}), store.ErrInvalid)
}

// putToken stores tok and copies the stored row back into it.
func putToken(ctx context.Context, s store.TokenStore, tok *store.OAuthToken) error {
	got, err := s.PutToken(ctx, store.PutTokenParams{Token: *tok})
	if err == nil {
		*tok = *got
	}
	return err
}
