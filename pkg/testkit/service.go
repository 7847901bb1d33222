package testkit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// ExerciseLifecycle runs a service (its Run) on b until it answers its
// health subject as ready, stops it, requires a nil error from Run, and
// waits until nobody answers the health subject any more (micro drains its
// subscriptions asynchronously, so one more request may still be routed).
func ExerciseLifecycle(t testing.TB, b *Bus, service string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	health := func() (bus.HealthReply, error) {
		return bus.Request[bus.HealthReply](context.Background(), b.NC, b.Names.Health(service), struct{}{})
	}
	Eventually(t, 10*time.Second, service+" health", func() bool {
		h, err := health()
		return err == nil && h.Ready && h.Status == "ok"
	})
	cancel()
	if err := Receive(t, 60*time.Second, service+" Run to return after its context was cancelled", done); err != nil {
		t.Fatalf("%s run: %v", service, err)
	}
	Eventually(t, 5*time.Second, service+" health to go unanswered after stop", func() bool {
		_, err := health()
		return errors.Is(err, bus.ErrUnavailable)
	})
}
