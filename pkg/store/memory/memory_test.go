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
	_, getErr := tasks.GetTask(ctx, "x")
	_, listErr := tasks.ListTasks(ctx, store.ListTasksParams{UserID: "u"})
	_, claimErr := tasks.ClaimDueTasks(ctx, store.ClaimParams{Owner: "w", Lease: time.Minute, Limit: 1})
	_, cancelErr := tasks.RequestCancel(ctx, "u", "th", "x")
	for name, err := range map[string]error{
		"InsertTask":           tasks.InsertTask(ctx, &store.Task{}),
		"GetTask":              getErr,
		"ListTasks":            listErr,
		"ClaimDueTasks":        claimErr,
		"UpdateTaskUnderLease": tasks.UpdateTaskUnderLease(ctx, "x", "w", func(*store.Task) {}),
		"RequestCancel":        cancelErr,
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
	if err := tokens.PutToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	tok.RefreshTokenEnc[0] = 'X'
	got, err := tokens.GetToken(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.RefreshTokenEnc) != "abc" {
		t.Fatalf("the store shares memory with the caller: %q", got.RefreshTokenEnc)
	}
}
