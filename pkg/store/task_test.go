package store_test

import (
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

func TestNewTaskID(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^mcp-task-[0-9a-f]{32}$`)
	a, b := store.NewTaskID(), store.NewTaskID()
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Fatalf("NewTaskID() = %q, %q; want distinct mcp-task- + 32 hex", a, b)
	}
}

func TestIsTerminalStatus(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]bool{
		store.TaskStatusSubmitted: false, store.TaskStatusWorking: false, store.TaskStatusInputRequired: false,
		store.TaskStatusCompleted: true, store.TaskStatusFailed: true, store.TaskStatusCancelled: true,
	} {
		if got := store.IsTerminalStatus(status); got != want {
			t.Errorf("IsTerminalStatus(%q) = %v", status, got)
		}
	}
}

func TestStatusesDefinedOnce(t *testing.T) {
	t.Parallel()
	want := []string{"submitted", "working", "input_required", "completed", "failed", "cancelled"}
	if got := store.TaskStatuses(); !slices.Equal(got, want) {
		t.Fatalf("TaskStatuses() = %v, want %v", got, want)
	}
	if got := store.NonTerminalTaskStatuses(); !slices.Equal(got, want[:3]) {
		t.Fatalf("NonTerminalTaskStatuses() = %v, want %v", got, want[:3])
	}
	store.TaskStatuses()[0] = "mutated"
	if store.TaskStatuses()[0] != "submitted" {
		t.Fatal("TaskStatuses shares its slice with callers")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	task := store.Task{UserID: "u", ThreadID: "t", ServerName: "s", DriverName: "d", RemoteTaskID: "r", TaskName: "n"}
	if err := task.Validate(); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Validate before ApplyDefaults = %v, want ErrInvalid (no id, no status)", err)
	}
	task.ApplyDefaults()
	if err := task.Validate(); err != nil {
		t.Fatalf("Validate after ApplyDefaults: %v", err)
	}
	// Tests simulate expiry with ClaimParams.Now, not with negative leases.
	if err := (store.ClaimParams{Owner: "w", Lease: -time.Second, Limit: 1}).Validate(); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a negative lease: %v, want ErrInvalid", err)
	}
	if err := (store.ClaimParams{Owner: "w", Lease: time.Second, Limit: 1}).Validate(); err != nil {
		t.Fatalf("a valid claim: %v", err)
	}
}
