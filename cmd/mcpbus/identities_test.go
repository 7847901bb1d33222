package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// identityUpstream is the demo MCP server over streamable HTTP behind an
// OAuth client_credentials token endpoint: /mcp answers only with the
// access token /token hands out, which expires at once, so every use
// refreshes it through the tokens service. It returns the upstream's base
// URL and the count of tokens handed out.
func identityUpstream(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, t.TempDir(), "demo-http", demoBin, "-transport", "http", "-addr", demoAddr)
	testkit.Eventually(t, 30*time.Second, "the demo server listening", func() bool {
		c, err := net.Dial("tcp", demoAddr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	var issued atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: demoAddr})
	proxy.FlushInterval = -1
	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		n := issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		// expires_in 1 is inside the refresh skew: every use fetches again.
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "Bearer", "expires_in": 1})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer tok-") {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	return up.URL, &issued
}

// TestNATSServicesRunAsTheirOwnUsers runs the five services on a
// nats-server with deploy/nats/accounts.conf as shipped, each connected as
// its own user (mcpbus-api, mcpbus-discovery, ...) with its password from
// MCPBUS_NATS_<SERVICE>_PASSWORD, and shows the deployment working: a
// stdio call, an OAuth upstream's call whose token is refreshed by the
// tokens service, a durable task submitted, polled to completion and
// announced, and a cache reset, all without a single permission violation
// in the server's log. Then it takes each service's user and tries what
// that service never needs: every attempt is refused by the server.
func TestNATSServicesRunAsTheirOwnUsers(t *testing.T) {
	p := startPermNATS(t, nil)
	upURL, issued := identityUpstream(t)
	ext := fmt.Sprintf(`{"mcpServers": {
		"demo": {"type": "stdio", "command": %q},
		"reports": {"type": "http", "url": "%s/mcp",
			"oauth": {"enabled": true, "token_url": "%s/token", "grant_type": "client_credentials", "client_id": "mcpbus", "client_secret": "s3"},
			"task_toolsets": [{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}
	}}`, demoBin, upURL, upURL)
	names := bus.Names{}.WithUserSubjects(true)
	st := p.startStack(t, names, ext)

	observer := testkit.ConnectNATSUser(t, p.url(""), "test-observer", p.pw["OBSERVER"], "")
	const thread = "ids"
	events, err := observer.NC.SubscribeSync(names.TaskEvents(thread))
	if err != nil {
		t.Fatal(err)
	}

	// A stdio call: api → toolcall (catalog from discovery).
	status, body := httpJSON(t, "POST", st.api+"/api/mcp/tools/demo_echo/call", `{"arguments":{"message":"hi"},"thread_id":"`+thread+`"}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:hi") {
		t.Fatalf("stdio call as per-service users: %d %v", status, body)
	}
	// An OAuth upstream: toolcall asks tokens, which fetches a fresh token.
	before := issued.Load()
	status, body = httpJSON(t, "POST", st.api+"/api/mcp/tools/reports_add/call", `{"arguments":{"a":2,"b":3}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:5") {
		t.Fatalf("oauth upstream call as per-service users: %d %v", status, body)
	}
	if issued.Load() <= before {
		t.Errorf("the tokens service fetched no token for the call (%d before, %d after)", before, issued.Load())
	}
	// A durable task: toolcall submits, taskpoller polls through
	// toolcall (mcpbus.internal.call) and publishes the event.
	status, body = httpJSON(t, "POST", st.api+"/api/mcp/tools/reports_submit_report/call",
		`{"arguments":{"topic":"ids","steps":1},"thread_id":"`+thread+`"}`)
	task, _ := body["task"].(map[string]any)
	taskID, _ := task["task_id"].(string)
	if status != 200 || !strings.HasPrefix(taskID, "mcp-task-") {
		t.Fatalf("task submit as per-service users: %d %v", status, body)
	}
	testkit.Eventually(t, 60*time.Second, "the task to complete", func() bool {
		_, detail := httpJSON(t, "GET", st.api+"/api/threads/"+thread+"/mcp-tasks/"+taskID, "")
		return detail["status"] == "completed"
	})
	for {
		m, err := events.NextMsg(60 * time.Second)
		if err != nil {
			t.Fatalf("no completion event of %s from the task poller: %v", taskID, err)
		}
		if strings.Contains(string(m.Data), taskID) && strings.Contains(string(m.Data), `"completed"`) {
			break
		}
	}
	// A cache reset: api → discovery, which bumps the generation.
	gen := st.generation(t)
	status, body = httpJSON(t, "POST", st.api+"/api/mcp/cache/reset", `{}`)
	if status != 200 || body["success"] != true || st.generation(t) <= gen {
		t.Fatalf("cache reset as per-service users: %d %v (generation was %d)", status, body, gen)
	}
	// A virtual server made through the admin API (the api writes the
	// config bucket's virtual_servers key, every service applies it), a
	// call through it counted in the quota bucket (toolcall: a window and
	// a slot taken and freed), and the admin view's quota state (the api
	// reads that bucket).
	status, body = httpJSON(t, "PUT", st.api+"/api/mcp/virtual-servers/ids",
		`{"servers": ["demo"], "tools": ["demo_echo"], "quotas": [{"calls": 5, "interval_seconds": 3600}, {"concurrent": 2}]}`)
	if status != 201 {
		t.Fatalf("creating a virtual server as per-service users: %d %v", status, body)
	}
	testkit.Eventually(t, 30*time.Second, "a call through the new virtual server", func() bool {
		status, _ := httpJSON(t, "POST", st.api+"/api/mcp/tools/demo_echo/call?virtual=ids", `{"arguments":{"message":"v"}}`)
		return status == 200
	})
	status, body = httpJSON(t, "GET", st.api+"/api/mcp/virtual-servers", "")
	if status != 200 || !strings.Contains(fmt.Sprint(body["virtual_servers"]), "calls:1 subjects:1") ||
		!strings.Contains(fmt.Sprint(body["virtual_servers"]), "in_flight:map[calls:0 replicas:0]") {
		t.Fatalf("the virtual servers' quota state as per-service users: %d %v", status, body)
	}
	// What the flows above do not reach: federation, tool pins, the
	// rediscover request and the quota bucket, each done as the user of the
	// service that does it.
	fedLists := []bus.Verb{bus.VerbResourcesList, bus.VerbResourceTemplatesList, bus.VerbPromptsList}
	fedCalls := []bus.Verb{bus.VerbResourcesRead, bus.VerbPromptsGet, bus.VerbCompletionComplete}
	const rediscover = "mcpbus.internal.discovery.rediscover"
	type use struct {
		subject   string
		subscribe bool
	}
	allowed := map[string][]use{
		bus.ServiceAPI:       {{names.PinEvents(), false}},
		bus.ServiceDiscovery: {{names.PinEvents(), true}, {rediscover, true}},
		bus.ServiceToolcall:  {{rediscover, false}, {"$KV." + names.QuotasBucket() + ".probe", false}},
		bus.ServiceTokens:    {{names.AuditConfig("probe"), false}},
	}
	for _, v := range fedLists {
		allowed[bus.ServiceAPI] = append(allowed[bus.ServiceAPI], use{names.Plain(v), false})
		allowed[bus.ServiceDiscovery] = append(allowed[bus.ServiceDiscovery], use{names.Plain(v), true}, use{names.AnyUser(v), true})
	}
	for _, v := range fedCalls {
		allowed[bus.ServiceAPI] = append(allowed[bus.ServiceAPI], use{names.Plain(v), false})
		allowed[bus.ServiceToolcall] = append(allowed[bus.ServiceToolcall], use{names.Plain(v), true}, use{names.AnyUser(v), true})
	}
	// Resource subscriptions: api asks toolcall and hears every user's
	// updates; toolcall publishes them.
	for _, v := range []bus.Verb{bus.VerbResourcesSubscribe, bus.VerbResourcesUnsubscribe} {
		allowed[bus.ServiceAPI] = append(allowed[bus.ServiceAPI], use{names.Plain(v), false})
		allowed[bus.ServiceToolcall] = append(allowed[bus.ServiceToolcall], use{names.Plain(v), true}, use{names.AnyUser(v), true})
	}
	allowed[bus.ServiceAPI] = append(allowed[bus.ServiceAPI], use{names.ResourcesUpdatedAll(), true})
	allowed[bus.ServiceToolcall] = append(allowed[bus.ServiceToolcall], use{names.ResourcesUpdated("alice"), false})
	for svc, uses := range allowed {
		u := testkit.ConnectNATSUser(t, p.url(""), svc, p.pw[userVar(svc)], names.ServiceInbox(svc))
		for _, a := range uses {
			var err error
			if a.subscribe {
				_, err = u.NC.Subscribe(a.subject, func(*nats.Msg) {})
			} else {
				err = u.NC.Publish(a.subject, []byte(`{}`))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := u.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		u.NC.Close()
	}
	if v := p.Violations(); len(v) > 0 {
		t.Fatalf("the services hit permissions accounts.conf does not give them:\n%s", strings.Join(v, "\n"))
	}

	// What each service's user must not do.
	type attempt struct {
		what, subject string
		subscribe     bool
	}
	forbidden := map[string][]attempt{
		bus.ServiceTaskpoller: {
			{"request an access token from the token chain", names.InternalToken(), false},
			{"read decrypted personal connections", names.InternalPersonal(), false},
			{"write the config key", "$KV." + names.ConfigBucket() + "." + bus.KVKeyConfig, false},
			{"read the other services' replies", "_INBOX.>", true},
		},
		bus.ServiceAPI: {
			{"publish a task event", names.TaskEvents(thread), false},
			{"publish a catalog event", names.EventsCatalog(), false},
			{"ask tokens for a token", names.InternalToken(), false},
			{"bump the generation itself", "$KV." + names.ConfigBucket() + "." + bus.KVKeyGen, false},
			{"receive tool calls", names.ToolsCall(), true},
			{"publish a resource update", names.ResourcesUpdated("alice"), false},
			{"receive resource subscriptions", names.ResourcesSubscribe(), true},
		},
		bus.ServiceDiscovery: {
			{"open the MCP sessions bucket", "$JS.API.STREAM.INFO.KV_" + names.MCPSessionsBucket(), false},
			{"read an MCP session", "$JS.API.DIRECT.GET.KV_" + names.MCPSessionsBucket() + ".$KV." + names.MCPSessionsBucket() + ".x", false},
			{"read the audit stream", "$JS.API.CONSUMER.CREATE." + names.AuditStream(), false},
			{"purge the config bucket", "$JS.API.STREAM.PURGE.KV_" + names.ConfigBucket(), false},
			{"write the config key", "$KV." + names.ConfigBucket() + "." + bus.KVKeyConfig, false},
			{"read the connected accounts", "$JS.API.DIRECT.GET.KV_" + names.OAuthBucket() + ".$KV." + names.OAuthBucket() + ".x", false},
			{"open the connected accounts bucket", "$JS.API.STREAM.INFO.KV_" + names.OAuthBucket(), false},
		},
		bus.ServiceToolcall: {
			{"write the config key", "$KV." + names.ConfigBucket() + "." + bus.KVKeyConfig, false},
			{"bump the generation", "$KV." + names.ConfigBucket() + "." + bus.KVKeyGen, false},
			{"write discovery's presence", "$KV." + names.PresenceBucket() + ".discovery.x", false},
			{"delete the audit stream", "$JS.API.STREAM.DELETE." + names.AuditStream(), false},
			{"publish a task event", names.TaskEvents(thread), false},
			{"receive token requests", names.InternalToken(), true},
			{"hear the resource updates api replicas deliver", names.ResourcesUpdatedAll(), true},
		},
		bus.ServiceTokens: {
			{"call a tool", names.ToolsCall(), false},
			{"publish a catalog event", names.EventsCatalog(), false},
			{"receive tool calls", names.ToolsCall(), true},
			{"receive personal connection requests", names.InternalPersonal(), true},
			{"read the other services' replies", names.ServiceInbox(bus.ServiceToolcall) + ".>", true},
		},
	}
	for svc, attempts := range forbidden {
		u := testkit.ConnectNATSUser(t, p.url(""), svc, p.pw[userVar(svc)], names.ServiceInbox(svc))
		for _, a := range attempts {
			var err error
			if a.subscribe {
				_, err = u.NC.Subscribe(a.subject, func(*nats.Msg) {})
			} else {
				err = u.NC.PublishRequest(a.subject, u.NC.NewRespInbox(), []byte(`{}`))
			}
			if err != nil {
				t.Fatal(err)
			}
			u.Refused(t, svc+" trying to "+a.what, a.subject)
		}
	}
	// The refusals above reached the server's log: the check that the
	// happy path logged none reads the right thing.
	if len(p.Violations()) == 0 {
		t.Error("the server logged none of the refusals; the violation log is not read")
	}
}
