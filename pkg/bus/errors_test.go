package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// refusal is an error with a message written for the caller.
type refusal struct{ msg string }

func (r *refusal) Error() string       { return "policy: " + r.msg + " (rule 7 of /etc/mcpbus/policy.yaml)" }
func (r *refusal) UserMessage() string { return r.msg }

// TestCausesStayInTheProcess sends errors with private causes across the
// bus: the caller gets the code and the public message only (the reply's
// bytes never hold the cause), and the responder's log holds the cause.
func TestCausesStayInTheProcess(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const secretCause = "dial tcp 10.1.2.3:5432: connection refused"
	nc := b.Connect(t)
	svc, err := micro.AddService(nc, micro.Config{Name: "test", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	h := bus.Handler(context.Background(), &wg, log, func(ctx context.Context, req echoReq) (echoResp, error) {
		switch req.Text {
		case "down":
			return echoResp{}, bus.Wrap(bus.CodeUnavailable, errors.New(secretCause), "the database is not available")
		case "refused":
			return echoResp{}, bus.WrapUser(bus.CodeConfigError, fmt.Errorf("launch: %w", &refusal{"command 'sh' is not allowed"}), "fallback")
		default:
			return echoResp{}, bus.WrapUser(bus.CodeConfigError, errors.New("mkdir /var/lib/mcpbus/ws: permission denied"), "the workspace cannot be prepared")
		}
	})
	if err := svc.AddEndpoint("echo", h, micro.WithEndpointSubject("test.causes")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(); wg.Wait() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]struct {
		code    bus.Code
		message string
		private string
	}{
		"down":    {bus.CodeUnavailable, "the database is not available", secretCause},
		"refused": {bus.CodeConfigError, "command 'sh' is not allowed", "/etc/mcpbus/policy.yaml"},
		"mkdir":   {bus.CodeConfigError, "the workspace cannot be prepared", "/var/lib/mcpbus/ws"},
	} {
		msg, err := b.NC.Request("test.causes", []byte(`{"text":"`+text+`"}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg.Data), want.private) {
			t.Errorf("%s: the reply carries the cause: %s", text, msg.Data)
		}
		_, got := bus.DecodeReply[echoResp](msg)
		var be *bus.Error
		if !errors.As(got, &be) || be.Code != want.code || be.Message != want.message || be.Cause != nil {
			t.Errorf("%s: error = %#v, want %s %q without a cause", text, got, want.code, want.message)
		}
		if !strings.Contains(logs.String(), want.private) {
			t.Errorf("%s: the cause was not logged:\n%s", text, logs.String())
		}
	}
}
