package memory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/memory"
	"github.com/mcpbus/mcpbus/pkg/store/storetest"
)

func newStore(t *testing.T) store.Store {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.ExerciseStore(t, newStore)
}

func TestTokens(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTokens(t, newStore)
}

func TestConnections(t *testing.T) {
	t.Parallel()
	storetest.ExerciseConnections(t, newStore)
}

func TestTasksUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tasks := memory.New().Tasks()
	claim := store.ClaimParams{Owner: "w", Lease: time.Minute, Limit: 1}
	lease := store.UpdateUnderLeaseParams{ID: "x", Owner: "w", Update: func(*store.Task) {}}
	_, insertErr := tasks.InsertTask(ctx, store.InsertTaskParams{})
	_, getErr := tasks.GetTask(ctx, store.GetTaskParams{ID: "x"})
	_, listErr := tasks.ListTasks(ctx, store.ListTasksParams{UserID: "u"})
	_, pollsErr := tasks.ClaimDuePolls(ctx, claim)
	_, cancelsErr := tasks.ClaimDueCancels(ctx, claim)
	_, notesErr := tasks.ClaimDueNotifications(ctx, claim)
	_, cancelErr := tasks.RequestCancel(ctx, store.RequestCancelParams{UserID: "u", ThreadID: "th", TaskID: "x"})
	for name, err := range map[string]error{
		"InsertTask":                   insertErr,
		"GetTask":                      getErr,
		"ListTasks":                    listErr,
		"ClaimDuePolls":                pollsErr,
		"ClaimDueCancels":              cancelsErr,
		"ClaimDueNotifications":        notesErr,
		"UpdateTaskUnderLease":         tasks.UpdateTaskUnderLease(ctx, lease),
		"UpdateNotificationUnderLease": tasks.UpdateNotificationUnderLease(ctx, lease),
		"RequestCancel":                cancelErr,
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: error = %v, want ErrUnavailable", name, err)
		}
	}
}

func TestValuesAreCopied(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tokens := memory.New().Tokens()
	tok := &store.OAuthToken{ConnectionKey: "k", RefreshTokenEnc: []byte("abc")}
	if _, err := tokens.PutToken(ctx, store.PutTokenParams{Token: *tok}); err != nil {
		t.Fatal(err)
	}
	tok.RefreshTokenEnc[0] = 'X'
	got, err := tokens.GetToken(ctx, store.GetTokenParams{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.RefreshTokenEnc) != "abc" {
		t.Fatalf("the store shares memory with the caller: %q", got.RefreshTokenEnc)
	}
}
