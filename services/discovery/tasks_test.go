package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// demoURL serves the demo server (with its task tools) over streamable HTTP.
func demoURL(t *testing.T) string {
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// reportsServer is a task-enabled server entry; extra is added to it.
func reportsServer(url, submit, extra string) srvJSON {
	return srvJSON{"reports", httpServer(url, fmt.Sprintf(`"task_toolsets": [{"name": "reports", "submit_tool": %q,
		"status_tool": "get_report_status", "cancel_tool": "cancel_report"}]%s`, submit, extra))}
}

// heldBack waits until the server named name is held back by the drift
// guard (GET /api/mcp/servers: failed, restart_required) with a reason
// naming it and every field in fields, and returns the reason.
func heldBack(t *testing.T, b *testkit.Bus, what, name string, fields ...string) string {
	t.Helper()
	var got string
	testkit.Eventually(t, 20*time.Second, what, func() bool {
		for _, s := range servers(t, b, bus.ServersRequest{}).Servers {
			if s.Name != name || !s.RestartRequired || s.State != bus.ServerStateFailed || !strings.Contains(s.LastError, "'"+name+"'") {
				continue
			}
			for _, f := range fields {
				if !strings.Contains(s.LastError, f) {
					return false
				}
			}
			got = s.LastError
			return true
		}
		return false
	})
	return got
}

// servingOthers waits until the catalog lists web_w0 while the task
// server's submit tool is held back.
func servingOthers(t *testing.T, b *testkit.Bus, what string) {
	t.Helper()
	listUntil(t, b, what, func(r bus.ToolsListReply) bool {
		return hasTool(r, "web_w0") && !hasTool(r, "reports_submit_report") && slices.Contains(failedNames(r), "reports")
	})
}

func TestTaskToolsetsListOnlyTheSubmitTool(t *testing.T) {
	t.Parallel()
	web := newFake(t, tools("w", 1)...)
	b := start(t, cfgOf(reportsServer(demoURL(t), "submit_report", ""), srvJSON{"web", httpServer(web.URL, "")}))
	r := mustList(t, b)
	submit := findTool(t, r, "reports_submit_report")
	if submit.TaskToolset != "reports" || !strings.Contains(submit.Description, "durable background task 'reports'") {
		t.Errorf("submit tool = %+v; want task_toolset reports and the durable-task note", submit)
	}
	for _, internal := range []string{"reports_get_report_status", "reports_cancel_report"} {
		if hasTool(r, internal) || slices.Contains(r.Bind, internal) {
			t.Errorf("runtime-internal %s is offered to agents", internal)
		}
	}
	// toolcall's catalog has them, for the poller's status and cancel calls.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	full, err := bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.InternalCatalog(), bus.ToolsListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTool(full, "reports_get_report_status") || !hasTool(full, "reports_cancel_report") || !hasTool(full, "web_w0") {
		t.Errorf("internal catalog = %v", names(full))
	}
}

func TestTaskServerWithoutItsRawToolIsAConfigError(t *testing.T) {
	t.Parallel()
	web := newFake(t, tools("w", 1)...)
	b := start(t, cfgOf(reportsServer(demoURL(t), "submit_reprot", ""), srvJSON{"web", httpServer(web.URL, "")}))
	_, err := list(t, b)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeConfigError || !strings.Contains(be.Message, "'reports'") || !strings.Contains(be.Message, "'submit_reprot'") {
		t.Fatalf("err = %v; want config_error naming the server and the missing tool", err)
	}
	if st := servers(t, b, bus.ServersRequest{NoRefresh: true}); st.Error == nil || st.Error.Code != bus.CodeConfigError {
		t.Errorf("servers error = %+v, want the config_error", st.Error)
	}
}

func TestFailingTaskServerIsSkippedLikeAnyOther(t *testing.T) {
	t.Parallel()
	down, web := newFake(t), newFake(t, tools("w", 1)...)
	down.mode.Store(modeFail)
	b := start(t, cfgOf(reportsServer(down.URL, "submit_report", ""), srvJSON{"web", httpServer(web.URL, "")}))
	r := mustList(t, b)
	if !hasTool(r, "web_w0") || strings.Join(failedNames(r), ",") != "reports" {
		t.Errorf("tools %v, failed %+v; want web listed and reports skipped", names(r), r.FailedServers)
	}
}

func TestDriftGuardRefusesTaskServerChangesUntilRestart(t *testing.T) {
	t.Parallel()
	url, url2 := demoURL(t), demoURL(t)
	web := newFake(t, tools("w", 1)...)
	webSrv := srvJSON{"web", httpServer(web.URL, "")}
	orig := reportsServer(url, "submit_report", "")
	b := start(t, cfgOf(orig, webSrv))
	mustList(t, b)

	// Description and routing of the task server stay hot, and so does any
	// change to a server without task toolsets.
	b.PublishExtensions(t, cfgOf(reportsServer(url, "submit_report", `, "description": "Reports", "routing": {"mode": "prefer", "keywords": ["report"]}`),
		srvJSON{"web", httpServer(web.URL, `"tool_name_prefix": false`)}))
	listUntil(t, b, "hot changes applied", func(r bus.ToolsListReply) bool {
		return hasTool(r, "w0") && findTool(t, r, "reports_submit_report").Routing != nil
	})

	// Connection and timeout changes of the task server are refused.
	for what, changed := range map[string]srvJSON{
		"url":                  reportsServer(url2, "submit_report", ""),
		"session_init_timeout": reportsServer(url, "submit_report", `, "session_init_timeout": 5`),
		"headers":              reportsServer(url, "submit_report", `, "headers": {"X-Env": "staging"}`),
	} {
		b.PublishExtensions(t, cfgOf(changed, webSrv))
		servingOthers(t, b, "web keeps serving while reports is held back after changing "+what)
		if e := heldBack(t, b, "reports held back after changing "+what, "reports", what); !strings.Contains(e, "restart") || strings.Contains(e, "mcpInterceptors") {
			t.Errorf("%s: reason %q; want a restart asked for, naming only what changed", what, e)
		}
		// Back to the startup config before the next change, so each
		// refusal is observed fresh.
		b.PublishExtensions(t, cfgOf(orig, webSrv))
		listUntil(t, b, "the startup config accepted after "+what, func(r bus.ToolsListReply) bool { return hasTool(r, "reports_submit_report") })
	}
	// So is a new interceptor chain while task servers exist.
	b.PublishExtensions(t, cfgWith(`"mcpInterceptors": ["request_logger"]`, orig, webSrv))
	servingOthers(t, b, "web keeps serving after changing mcpInterceptors")
	if e := heldBack(t, b, "reports held back after changing mcpInterceptors", "reports", "mcpInterceptors"); !strings.Contains(e, "restart") {
		t.Errorf("interceptors: reason %q; want a restart asked for", e)
	}
	// The startup configuration works again.
	b.PublishExtensions(t, cfgOf(orig, webSrv))
	listUntil(t, b, "the startup config accepted again", func(r bus.ToolsListReply) bool { return hasTool(r, "reports_submit_report") })
}

func TestDriftGuardSnapshotIsTheFileTheProcessStartedWith(t *testing.T) {
	t.Parallel()
	url, url2 := demoURL(t), demoURL(t)
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	stale, current := cfgOf(reportsServer(url, "submit_report", "")), cfgOf(reportsServer(url2, "submit_report", ""))
	b := testkit.StartBus(t)
	// The KV still holds the previous run's file when the process starts
	// with the edited one (dev mode restarts everything at once).
	publishAt := func(raw string) {
		t.Helper()
		if err := sharedstate.PublishConfig(context.Background(), b.KV, sharedstate.ConfigRecord{Path: path, Raw: []byte(raw)}); err != nil {
			t.Fatal(err)
		}
	}
	publishAt(stale)
	local, err := config.ParseExtensions(path, []byte(current))
	if err != nil {
		t.Fatal(err)
	}
	runServiceWith(t, b, noWarm, local)
	publishAt(current)
	r := listUntil(t, b, "the edited task server accepted", func(r bus.ToolsListReply) bool { return hasTool(r, "reports_submit_report") })
	if findTool(t, r, "reports_submit_report").Server != "reports" {
		t.Errorf("catalog = %v", names(r))
	}
	// The file it started with is the snapshot: the stale version drifts.
	publishAt(stale)
	heldBack(t, b, "the stale version held back", "reports", "url", "restart")
}

func TestDriftGuardSnapshotIsTheFirstConfigWhenNoneExisted(t *testing.T) {
	t.Parallel()
	url, url2 := demoURL(t), demoURL(t)
	b := testkit.StartBus(t)
	runService(t, b, noWarm)
	b.PublishExtensions(t, cfgOf(reportsServer(url, "submit_report", "")))
	listUntil(t, b, "the first config served", func(r bus.ToolsListReply) bool { return hasTool(r, "reports_submit_report") })
	b.PublishExtensions(t, cfgOf(reportsServer(url2, "submit_report", "")))
	heldBack(t, b, "a later url change held back", "reports", "url", "restart")
}

// TestDisablingATaskServerStopsOnlyIt: disabling (or removing) the only
// task server is no drift: every other server keeps serving, nothing is
// held back and no mcpInterceptors change is claimed.
func TestDisablingATaskServerStopsOnlyIt(t *testing.T) {
	t.Parallel()
	web := newFake(t, tools("w", 1)...)
	webSrv := srvJSON{"web", httpServer(web.URL, "")}
	url := demoURL(t)
	b := start(t, cfgOf(reportsServer(url, "submit_report", ""), webSrv))
	mustList(t, b)
	b.PublishExtensions(t, cfgOf(reportsServer(url, "submit_report", `, "enabled": false`), webSrv))
	r := listUntil(t, b, "web served with reports disabled", func(r bus.ToolsListReply) bool {
		return hasTool(r, "web_w0") && !hasTool(r, "reports_submit_report")
	})
	if len(r.FailedServers) != 0 {
		t.Errorf("failed servers %+v; want none", r.FailedServers)
	}
	for _, s := range servers(t, b, bus.ServersRequest{}).Servers {
		if s.RestartRequired || strings.Contains(s.LastError, "mcpInterceptors") {
			t.Errorf("server %s: %+v; want nothing held back", s.Name, s)
		}
	}
}
