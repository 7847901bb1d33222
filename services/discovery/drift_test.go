package discovery_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// configOwner is the api's side of the shared config: one FilePublisher per
// process lifetime over one file.
type configOwner struct {
	t    *testing.T
	path string
	pub  *sharedstate.FilePublisher
}

// newConfigFile is an extensions config file holding raw.
func newConfigFile(t *testing.T, raw string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	writeConfig(t, path, raw)
	return path
}

func writeConfig(t *testing.T, path, raw string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startOwner is an api process starting: it publishes the file, as
// api.Service.Run does (its startup publication).
func startOwner(t *testing.T, b *testkit.Bus, path string) *configOwner {
	t.Helper()
	o := &configOwner{t: t, path: path, pub: &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}}
	o.publish()
	return o
}

// edit is an operator's edit while the owner runs, published as the
// config API and the file follower publish (forced, not a startup).
func (o *configOwner) edit(raw string) {
	o.t.Helper()
	writeConfig(o.t, o.path, raw)
	o.publish()
}

func (o *configOwner) publish() {
	o.t.Helper()
	if _, err := o.pub.PublishNow(context.Background(), true); err != nil {
		o.t.Fatal(err)
	}
}

// restartFixture is a deployment that ran with a task server at one url
// and whose file now names another one plus a new plain server: the stale
// KV a full restart finds.
type restartFixture struct {
	b                *testkit.Bus
	path             string
	edited, hotEdit  string
	wantServedEdited func(bus.ToolsListReply) bool
}

func newRestartFixture(t *testing.T) restartFixture {
	t.Helper()
	url, url2 := demoURL(t), demoURL(t)
	web := newFake(t, tools("w", 1)...)
	old := cfgOf(reportsServer(url, "submit_report", ""))
	edited := cfgOf(reportsServer(url2, "submit_report", ""), srvJSON{"web", httpServer(web.URL, "")})
	hotEdit := cfgOf(reportsServer(url2, "submit_report", `, "headers": {"X-Env": "staging"}`), srvJSON{"web", httpServer(web.URL, "")})
	b := testkit.StartBus(t)
	path := newConfigFile(t, old)
	startOwner(t, b, path) // the previous run's api
	writeConfig(t, path, edited)
	return restartFixture{b: b, path: path, edited: edited, hotEdit: hotEdit, wantServedEdited: func(r bus.ToolsListReply) bool {
		return hasTool(r, "reports_submit_report") && hasTool(r, "web_w0")
	}}
}

// TestDriftGuardFullRestartDiscoveryBeforeAPI: discovery starts on the
// previous run's config, then the api starts with the edited file; the
// deployment serves the edited file with its task tools, and a hot edit of
// the task server afterwards is still refused.
func TestDriftGuardFullRestartDiscoveryBeforeAPI(t *testing.T) {
	t.Parallel()
	f := newRestartFixture(t)
	runService(t, f.b, noWarm)
	owner := startOwner(t, f.b, f.path)
	listUntil(t, f.b, "the edited file served with task tools", f.wantServedEdited)

	owner.edit(f.hotEdit)
	servingOthers(t, f.b, "web keeps serving after a hot edit of the task server")
	if e := heldBack(t, f.b, "a hot edit of the task server held back", "reports", "headers"); !strings.Contains(e, "restart mcpbus") || !strings.Contains(e, "api service") {
		t.Errorf("reason %q; want it to say what to restart", e)
	}
}

// TestDriftGuardFullRestartAPIBeforeDiscovery is the other start order.
func TestDriftGuardFullRestartAPIBeforeDiscovery(t *testing.T) {
	t.Parallel()
	f := newRestartFixture(t)
	owner := startOwner(t, f.b, f.path)
	runService(t, f.b, noWarm)
	listUntil(t, f.b, "the edited file served with task tools", f.wantServedEdited)

	owner.edit(f.hotEdit)
	servingOthers(t, f.b, "web keeps serving after a hot edit of the task server")
	heldBack(t, f.b, "a hot edit of the task server held back", "reports", "headers", "restart")
}

// TestDriftGuardReplicaStartedAfterAHotEditRefusesIt: a discovery replica
// (re)started after a hot edit judges it against the deployment's startup
// configuration, not against whatever the KV held when it started, so it
// agrees with the replicas that saw the edit happen. Restarting the api
// makes the edit the new startup configuration.
func TestDriftGuardReplicaStartedAfterAHotEditRefusesIt(t *testing.T) {
	t.Parallel()
	f := newRestartFixture(t)
	owner := startOwner(t, f.b, f.path)
	owner.edit(f.hotEdit)
	runService(t, f.b, noWarm)
	heldBack(t, f.b, "the hot edit held back by a replica started after it", "reports", "headers")

	startOwner(t, f.b, f.path) // the api restarts with the edited file
	listUntil(t, f.b, "the edit served after the api's restart", f.wantServedEdited)
}
