package mcpclient_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestConnectErrorsAndLogsKeepSecretsOut is the attack of issue 11 item 6
// at the adapter: a URL carrying credentials (query and userinfo) that
// cannot be reached, and a stdio child that prints its env secret to
// stderr and dies. Neither the error nor anything logged (at Debug) may
// show a secret; the stdio error does not carry the stderr text at all,
// StderrTail has it redacted.
func TestConnectErrorsAndLogsKeepSecretsOut(t *testing.T) {
	t.Parallel()
	const (
		querySecret = "q-SEKRET-5a1"
		userSecret  = "u-SEKRET-5a2"
		passSecret  = "p-SEKRET-5a3"
		envSecret   = "e-SEKRET-5a4"
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens there any more: connection refused
	logs := &testkit.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var errs []string
	for _, spec := range []mcpclient.Spec{
		{Server: "http", Transport: mcpclient.TransportHTTP, URL: strings.Replace(closed, "//", "//"+userSecret+":"+passSecret+"@", 1) + "/mcp?api_key=" + querySecret},
		{Server: "sse", Transport: mcpclient.TransportSSE, URL: closed + "/sse?token=" + querySecret},
		{Server: "stdio", Command: "sh", Args: []string{"-c", `echo "starting with $API_TOKEN" >&2; exit 3`},
			Env: map[string]string{"API_TOKEN": envSecret}},
	} {
		spec.Logger = logger
		c, err := mcpclient.Connect(ctx, spec)
		if err == nil {
			c.Close()
			t.Fatalf("%s: Connect succeeded", spec.Server)
		}
		t.Logf("%s: %v", spec.Server, err)
		errs = append(errs, err.Error())
		if spec.Server == "stdio" {
			if strings.Contains(err.Error(), "starting with") {
				t.Errorf("the connect error quotes the child's stderr: %v", err)
			}
			if tail := mcpclient.StderrTail(err); tail != "starting with ***" {
				t.Errorf("StderrTail = %q, want the redacted line", tail)
			}
		} else if !strings.Contains(err.Error(), closed) {
			t.Errorf("the error lost the URL's host: %v", err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the stderr line in the log (redacted, at debug)", func() bool {
		return strings.Contains(logs.String(), `msg="mcp server stderr" server=stdio line="starting with ***"`)
	})
	out := strings.Join(errs, "\n")
	for _, s := range []string{querySecret, userSecret, passSecret, envSecret, "api_key", "token="} {
		if strings.Contains(out, s) {
			t.Errorf("an error contains %q", s)
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("the log contains %q:\n%s", s, logs.String())
		}
	}
}
