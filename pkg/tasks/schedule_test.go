package tasks_test

import (
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		n                  int
		interval, max, out time.Duration
	}{
		{0, 5 * time.Second, 300 * time.Second, 5 * time.Second},
		{1, 5 * time.Second, 300 * time.Second, 10 * time.Second},
		{3, 5 * time.Second, 300 * time.Second, 40 * time.Second},
		{6, 5 * time.Second, 300 * time.Second, 300 * time.Second},
		{16, time.Millisecond, time.Hour, 65536 * time.Millisecond},
		{17, time.Millisecond, time.Hour, 65536 * time.Millisecond}, // exponent capped at 16
		{1000, 300 * time.Second, 3600 * time.Second, 3600 * time.Second},
		{-1, 5 * time.Second, 300 * time.Second, 5 * time.Second},
	}
	for _, tc := range tests {
		if got := tasks.Backoff(tc.n, tc.interval, tc.max); got != tc.out {
			t.Errorf("Backoff(%d, %s, %s) = %s, want %s", tc.n, tc.interval, tc.max, got, tc.out)
		}
	}
}

func TestNextPoll(t *testing.T) {
	s := tasks.Settings{PollInterval: 5 * time.Second, InputRequiredPollInterval: 60 * time.Second}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		status    string
		pollAfter time.Duration
		want      time.Duration // -1: nil
	}{
		{"poll interval", "working", 0, 5 * time.Second},
		{"remote hint", "working", 2 * time.Second, 2 * time.Second},
		{"hint capped at 24h", "working", 48 * time.Hour, 24 * time.Hour},
		{"input_required raised to its interval", "input_required", 2 * time.Second, 60 * time.Second},
		{"input_required longer hint kept", "input_required", 90 * time.Second, 90 * time.Second},
		{"terminal never", "completed", 0, -1},
		{"failed never", "failed", 5 * time.Second, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tasks.NextPoll(tc.status, tc.pollAfter, at, s)
			if tc.want < 0 {
				if got != nil {
					t.Fatalf("got %v, want nil", got)
				}
				return
			}
			if got == nil || got.Sub(at) != tc.want {
				t.Fatalf("got %v, want at+%s", got, tc.want)
			}
		})
	}
}
