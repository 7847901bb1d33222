package interceptors_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
)

func TestChainRunsInOrderAndLastHeaderWins(t *testing.T) {
	t.Parallel()
	var order []string
	mk := func(name, value string) interceptors.Named {
		return interceptors.Named{Name: name, Fn: func(ctx context.Context, req *interceptors.Request, next interceptors.Handler) (*interceptors.Result, error) {
			order = append(order, name)
			req.Headers["Authorization"] = value
			return next(ctx, req)
		}}
	}
	var sent string
	h := interceptors.Chain([]interceptors.Named{mk("a", "1"), mk("b", "2")}, func(_ context.Context, req *interceptors.Request) (*interceptors.Result, error) {
		sent = req.Headers["Authorization"]
		return &interceptors.Result{}, nil
	})
	if _, err := h(context.Background(), &interceptors.Request{Headers: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "a,b" || sent != "2" {
		t.Errorf("order %v, sent %q", order, sent)
	}
}

func TestBuildSkipsUnresolvableEntries(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	r := interceptors.Default()
	r.Register("broken", func(string, interceptors.Env) (interceptors.Interceptor, error) { return nil, errors.New("nope") })
	r.Register("none", func(string, interceptors.Env) (interceptors.Interceptor, error) { return nil, nil })
	got := r.Build([]string{"request_logger", "pkg.mod:builder", "broken", "none", "set_header:X-A=1", "set_header:bad name=1", "set_header:X-B= v", "nats:x"},
		interceptors.Env{Server: &config.Server{Name: "s"}, Log: log})
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "request_logger,set_header:X-A=1" {
		t.Errorf("built %v", names)
	}
	for _, want := range []string{"pkg.mod:builder", "broken", "bad name", "X-B", "nats:x"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning naming %q in:\n%s", want, logs.String())
		}
	}
}

func TestSetHeaderReplacesEverySpelling(t *testing.T) {
	t.Parallel()
	got := interceptors.Default().Build([]string{"set_header:Authorization=Bearer x"}, interceptors.Env{Server: &config.Server{Name: "s"}})
	if len(got) != 1 {
		t.Fatal("set_header not built")
	}
	req := &interceptors.Request{Headers: map[string]string{"authorization": "old"}}
	h := interceptors.Chain(got, func(_ context.Context, r *interceptors.Request) (*interceptors.Result, error) {
		return &interceptors.Result{}, nil
	})
	if _, err := h(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(req.Headers) != 1 || req.Headers["authorization"] != "Bearer x" {
		t.Errorf("headers = %v", req.Headers)
	}
}

// TestBuiltinNamesAreWhatConfigAccepts: config validation accepts exactly
// the interceptor names the default registry builds.
func TestBuiltinNamesAreWhatConfigAccepts(t *testing.T) {
	if got := interceptors.Default().Names(); !slices.Equal(got, config.BuiltinInterceptors) {
		t.Fatalf("registry %v, config.BuiltinInterceptors %v", got, config.BuiltinInterceptors)
	}
}
