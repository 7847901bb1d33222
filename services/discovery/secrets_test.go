package discovery_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestStderrAndSecretsStayOutOfFailedServers: a stdio server prints its env
// secret to stderr and exits; an http server's URL carries credentials and
// cannot be reached. failed_servers (what every user sees) has neither the
// secrets nor the stderr text; the server status (admins) has the stderr
// tail, redacted; the log has no secret.
func TestStderrAndSecretsStayOutOfFailedServers(t *testing.T) {
	t.Parallel()
	const (
		envSecret   = "env-SEKRET-d1"
		querySecret = "query-SEKRET-d2"
		userSecret  = "user-SEKRET-d3"
	)
	ok := newFake(t, tools("a", 1)...)
	logs := &testkit.SyncBuffer{}
	b := testkit.StartBus(t)
	b.PublishExtensions(t, cfgOf(
		srvJSON{"ok", httpServer(ok.URL, "")},
		srvJSON{"noisy", `{"command": "sh", "args": ["-c", "echo \"loading key $KEY\" >&2; exit 1"], "env": {"KEY": "` + envSecret + `"}}`},
		srvJSON{"creds", httpServer(fmt.Sprintf("http://%s:pw@127.0.0.1:1/mcp?api_key=%s", userSecret, querySecret), "")},
	))
	runServiceLogged(t, b, noWarm, nil, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	r := mustList(t, b)
	if got := failedNames(r); strings.Join(got, ",") != "creds,noisy" {
		t.Fatalf("failed servers %v", got)
	}
	shown, _ := json.Marshal(r.FailedServers)
	st := servers(t, b, bus.ServersRequest{NoRefresh: true})
	var tail string
	for _, s := range st.Servers {
		if s.Name == "noisy" {
			tail = s.Stderr
		}
	}
	if tail != "loading key ***" {
		t.Errorf("the admin's status has stderr %q, want the redacted line", tail)
	}
	if strings.Contains(string(shown), "loading key") {
		t.Errorf("failed_servers quotes the server's stderr: %s", shown)
	}
	status, _ := json.Marshal(st)
	for _, s := range []string{envSecret, querySecret, userSecret} {
		for what, text := range map[string]string{"failed_servers": string(shown), "the server status": string(status), "the log": logs.String()} {
			if strings.Contains(text, s) {
				t.Errorf("%s contains %s", what, s)
			}
		}
	}
	if !strings.Contains(string(shown), "127.0.0.1:1/mcp") {
		t.Errorf("the URL's host and path were lost: %s", shown)
	}
}
