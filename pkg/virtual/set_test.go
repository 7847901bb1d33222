package virtual_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

func catalog() []bus.Tool {
	return []bus.Tool{
		{Name: "gh_search", Server: "gh", OriginalName: "search", Description: "search code", Annotations: json.RawMessage(`{"title":"Search"}`)},
		{Name: "gh_delete_repo", Server: "gh", OriginalName: "delete_repo"},
		{Name: "web_fetch", Server: "web", OriginalName: "fetch", Deferred: true},
		{Name: "mail_send", Server: "mail", OriginalName: "send"},
		{Name: "lookup", Server: "gh", OriginalName: "lookup"}, // a plain name an override could shadow
	}
}

func names(tools []bus.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// TestSetViewAndNames: a set holds its servers' tools matching its globs,
// shows them under their overrides, and maps back only the names it
// shows: an overridden tool's raw name and a shadowed catalog name are not
// names of the set.
func TestSetViewAndNames(t *testing.T) {
	off := false
	set := virtual.New(config.VirtualServer{Name: "a", Servers: []string{"gh", "web"}, Tools: []string{"gh_s*", "web_*", "lookup"},
		ToolSearch: &off,
		Overrides: map[string]config.VirtualToolOverride{
			"gh_search": {Name: "lookup", Description: "find code", Annotations: map[string]any{"readOnlyHint": true}},
		}})
	view := set.View(catalog())
	if got := names(view); !slices.Equal(got, []string{"lookup", "web_fetch"}) {
		t.Fatalf("view %v; want [lookup web_fetch] (gh_delete_repo fails the globs, mail is not a server of the set, the catalog's lookup is shadowed)", got)
	}
	if v := view[0]; v.Description != "find code" || v.OriginalName != "search" || !strings.Contains(string(v.Annotations), `"readOnlyHint":true`) || !strings.Contains(string(v.Annotations), `"title":"Search"`) {
		t.Errorf("override not applied: %+v", v)
	}
	if view[1].Deferred {
		t.Error("the set's tool_search false left web_fetch deferred")
	}
	for visible, want := range map[string]string{"lookup": "gh_search", "web_fetch": "web_fetch"} {
		if got, ok := set.CatalogName(visible); !ok || got != want {
			t.Errorf("CatalogName(%q) = %q %v; want %q", visible, got, ok, want)
		}
	}
	if _, ok := set.CatalogName("gh_search"); ok {
		t.Error("the raw name of an overridden tool maps back")
	}
	if set.Allows("mail", "mail_send") || set.Allows("gh", "gh_delete_repo") || !set.Allows("gh", "gh_search") {
		t.Error("Allows disagrees with the servers and globs")
	}
	if !set.AllowsServer("web") || set.AllowsServer("mail") {
		t.Error("AllowsServer disagrees with servers")
	}
}

// TestEmptyToolsMeansEveryToolOfTheServers and quotas match the names the
// set shows.
func TestEmptyToolsMeansEveryToolOfTheServers(t *testing.T) {
	set := virtual.New(config.VirtualServer{Name: "b", Servers: []string{"gh"},
		Quotas: []config.Quota{{Tools: []string{"gh_delete_*"}, Calls: 1, IntervalSeconds: 60}, {Calls: 10, IntervalSeconds: 60}}})
	if got := names(set.View(catalog())); !slices.Equal(got, []string{"gh_search", "gh_delete_repo", "lookup"}) {
		t.Errorf("view %v", got)
	}
	if q := set.QuotasFor("gh_delete_repo"); len(q) != 2 || q[0].Index != 0 || q[1].Index != 1 {
		t.Errorf("quotas of gh_delete_repo %+v; want both", q)
	}
	if q := set.QuotasFor("gh_search"); len(q) != 1 || q[0].Index != 1 {
		t.Errorf("quotas of gh_search %+v; want the second", q)
	}
}

// TestCheckNamesThePolicy: a bound caller may use its sets only, and the
// whole catalog not at all; an unbound one anything.
func TestCheckNamesThePolicy(t *testing.T) {
	if err := virtual.Check(nil, "", virtual.PolicyKey, "k"); err != nil {
		t.Errorf("unbound caller refused: %v", err)
	}
	if err := virtual.Check([]string{"a"}, "a", virtual.PolicyKey, "k"); err != nil {
		t.Errorf("bound caller refused its own set: %v", err)
	}
	for _, asked := range []string{"", "b"} {
		err := bus.AsError(virtual.Check([]string{"a"}, asked, virtual.PolicyIdentity, "NATS identity 'w'"))
		if err == nil || err.Code != bus.CodeForbidden || err.Details["policy"] != virtual.PolicyIdentity || !strings.Contains(err.Message, "nats.identities") {
			t.Errorf("asking for %q: %+v; want forbidden naming nats.identities", asked, err)
		}
	}
	r := virtual.NewRegistry(config.VirtualSettings{Servers: []config.VirtualServer{{Name: "a", Servers: []string{"gh"}}}})
	if _, err := r.Resolve("nope"); bus.AsError(err).Code != bus.CodeNotFound {
		t.Errorf("unknown set: %v", err)
	}
}

// TestCompileAndLive: config.yaml's sets come first and win a name
// clash; the API's are added, a bad one left out; Live swaps the
// registry once per revision.
func TestCompileAndLive(t *testing.T) {
	file := config.VirtualSettings{Servers: []config.VirtualServer{{Name: "a", Servers: []string{"gh"}}},
		Identities: []config.NATSIdentity{{UserID: "w", VirtualServers: []string{"b"}}}}
	fromAPI := []config.VirtualServer{
		{Name: "a", Servers: []string{"web"}},                         // shadowed by the file's
		{Name: "b", Servers: []string{"web"}},                         // added
		{Name: "c", Servers: nil},                                     // invalid: left out
		{Name: "d", Servers: []string{"web"}, Tools: []string{"[x-"}}, // invalid glob
	}
	r := virtual.Compile(file, fromAPI)
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("names %v; want [a b]", got)
	}
	if a, _ := r.Get("a"); !a.AllowsServer("gh") || a.AllowsServer("web") {
		t.Error("the API's a replaced config.yaml's")
	}
	if got := r.IdentitySets("w"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("identities %v", got)
	}
	live := virtual.NewLive(file)
	before := live.Registry()
	if _, ok := before.Get("b"); ok {
		t.Fatal("b before any API record")
	}
	live.Apply(7, fromAPI)
	after := live.Registry()
	if _, ok := after.Get("b"); !ok || after == before {
		t.Fatal("Apply did not add b")
	}
	live.Apply(7, nil) // the same revision again: nothing changes
	if live.Registry() != after {
		t.Error("a revision already applied swapped the registry")
	}
	live.Apply(8, nil)
	if _, ok := live.Registry().Get("b"); ok {
		t.Error("a later empty record kept b")
	}
}
