package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// Keys of the quota test: alice and bob are plain users, root the admin.
const (
	qKeyAlice = "q-alice-key-0001"
	qKeyBob   = "q-bob-key-0002"
	qKeyAdmin = "q-admin-key-0003"
)

// TestQuotasAcrossToolcallReplicas runs discovery, two toolcall and two
// api processes (serve mode, one NATS) over the demo server:
//
//   - the virtual server agent-c allows 2 demo_block calls in flight per
//     caller: with alice's 2 running, each toolcall replica refuses her
//     third (REST 429 with Retry-After 1, an MCP error result naming the
//     limit), bob is not limited by alice's calls, and the end of one of
//     hers frees a slot; quota_state shows the calls in flight across
//     replicas;
//   - the server metered allows 3 calls an hour over every caller (alice's
//     and bob's together, over REST and NATS), refused on each replica past
//     that naming mcpServers.metered.quotas[0], audited as the call's
//     policy; capped allows 1 call in flight over every caller;
//   - a toolcall replica killed mid-call keeps its slots only until their
//     lease runs out: then quota_state shows none in flight.
func TestQuotasAcrossToolcallReplicas(t *testing.T) {
	t.Parallel()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dir := t.TempDir()
	apiA, apiB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metricsA, metricsB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {
  "demo": {"type": "stdio", "command": %[1]q},
  "metered": {"type": "stdio", "command": %[1]q, "quotas": [{"calls": 3, "interval_seconds": 3600}]},
  "capped": {"type": "stdio", "command": %[1]q, "quotas": [{"concurrent": 1}]}}}`, demoBin)
	settings := natsSettings(natsURL, names) + fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
    - {sha256: %s, user_id: root, role: admin}
virtual_servers:
  - name: agent-c
    servers: [demo]
    tools: [demo_block, demo_echo]
    quotas:
      - {tools: [demo_block], concurrent: 2}
`, apiA, sha(qKeyAlice), sha(qKeyBob), sha(qKeyAdmin))
	toolcalls := startReplicated(t, dir, natsURL, names, ext, settings, apiB, []string{"--metrics-listen", metricsA}, []string{"--metrics-listen", metricsB})
	toolcallB := toolcalls[1]
	bases := []string{"http://" + apiA, "http://" + apiB}
	for _, base := range bases {
		testkit.Eventually(t, 60*time.Second, base+" to list every server's tools", func() bool {
			status, _, body := vsREST(t, base, qKeyAlice, http.MethodGet, "/api/mcp/tools", nil)
			return status == http.StatusOK && strings.Contains(string(body), `"capped_block"`) && strings.Contains(string(body), `"metered_echo"`)
		})
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	q := quotaStack{t: t, nc: nc, names: names, admin: bases[0]}
	// Every call the test started is cancelled at the end, whatever
	// happened.
	t.Cleanup(q.cancelAll)
	// Each replica's refusals, from its own /metrics.
	refusals := func(metric, labels string) (a, b float64) {
		return metricSum(scrape("http://"+metricsA+"/metrics"), metric, labels), metricSum(scrape("http://"+metricsB+"/metrics"), metric, labels)
	}
	const setLimit = "virtual_servers[agent-c].quotas[0]"

	t.Run("concurrent quota of a set", func(t *testing.T) {
		q.t = t
		q.start("alice", "demo_block", "agent-c")
		q.start("alice", "demo_block", "agent-c")
		q.waitInFlight(setLimit, 2)
		// The third is refused whichever api and toolcall replica gets it:
		// until both toolcall replicas have refused one (a replica's own
		// count would let it run), every attempt must be refused.
		attempt := 0
		testkit.Eventually(t, 60*time.Second, "both toolcall replicas to refuse alice's third block call", func() bool {
			attempt++
			status, header, body := vsREST(t, bases[attempt%2], qKeyAlice, http.MethodPost, "/api/mcp/tools/demo_block/call?virtual=agent-c", map[string]any{"arguments": map[string]any{}})
			if status != http.StatusTooManyRequests || header.Get("Retry-After") != "1" || !strings.Contains(string(body), setLimit) {
				t.Fatalf("alice's third block call: %d Retry-After %q %s; want 429, Retry-After 1, naming %s", status, header.Get("Retry-After"), body, setLimit)
			}
			a, b := refusals("mcpbus_toolcall_virtual_server_decisions_total", `decision="rate_limited"`)
			return a > 0 && b > 0
		})
		c := vsStreamable(t, bases[1]+"/mcp/v/agent-c", qKeyAlice, "")
		if text, isErr := callText(t, c, "demo_block", map[string]any{}); !isErr || !strings.Contains(text, setLimit) || !strings.Contains(text, "rate_limited") {
			t.Errorf("over /mcp: %q %v; want an error result naming %s", text, isErr, setLimit)
		}
		// Bob's calls are his own.
		q.start("bob", "demo_block", "agent-c")
		q.waitInFlight(setLimit, 3)
		// The end of one of alice's frees a slot for her.
		q.cancel(q.calls[0])
		q.waitInFlight(setLimit, 2)
		q.start("alice", "demo_block", "agent-c")
		q.waitInFlight(setLimit, 3)
	})

	t.Run("quotas of a server", func(t *testing.T) {
		q.t = t
		const limit = "mcpServers.metered.quotas[0]"
		// Three calls an hour, whoever makes them, by any transport.
		for i, call := range []func() error{
			func() error { return q.restEcho(bases[0], qKeyAlice, "metered_echo") },
			func() error { return q.restEcho(bases[1], qKeyBob, "metered_echo") },
			func() error { return q.natsEcho("carol", "metered_echo") },
		} {
			if err := call(); err != nil {
				t.Fatalf("call %d of metered: %v", i+1, err)
			}
		}
		status, header, body := vsREST(t, bases[1], qKeyBob, http.MethodPost, "/api/mcp/tools/metered_echo/call", map[string]any{"arguments": map[string]any{"message": "4"}})
		if ra, _ := strconv.Atoi(header.Get("Retry-After")); status != http.StatusTooManyRequests || ra < 1 || ra > 3600 || !strings.Contains(string(body), limit) {
			t.Fatalf("call 4 of metered: %d Retry-After %q %s; want 429 naming %s", status, header.Get("Retry-After"), body, limit)
		}
		testkit.Eventually(t, 60*time.Second, "both toolcall replicas to refuse metered", func() bool {
			err := q.natsEcho("dave", "metered_echo")
			if be := bus.AsError(err); be == nil || be.Code != bus.CodeRateLimited || be.Details["policy"] != limit {
				t.Fatalf("dave's metered call: %v; want rate_limited naming %s", err, limit)
			}
			a, b := refusals("mcpbus_toolcall_rate_limited_total", `limit="upstream_quota"`)
			return a > 0 && b > 0
		})
		c := vsStreamable(t, bases[0]+"/mcp", qKeyAlice, "")
		if text, isErr := callText(t, c, "metered_echo", map[string]any{"message": "x"}); !isErr || !strings.Contains(text, limit) {
			t.Errorf("over /mcp: %q %v; want an error result naming %s", text, isErr, limit)
		}
		if err := q.natsEcho("dave", "demo_echo"); err != nil {
			t.Errorf("a server without quotas: %v", err)
		}
		if st := q.serverQuota("metered"); st.Window == nil || st.Window.Calls != 3 || st.Window.Subjects != 1 {
			t.Errorf("metered's quota_state %+v; want 3 calls counted over every caller", st)
		}
		testkit.Eventually(t, 60*time.Second, "the audit record of a refusal naming the server's quota", func() bool {
			_, _, body := vsREST(t, bases[0], qKeyAdmin, http.MethodGet, "/api/mcp/audit?user=bob&kind=call&limit=500", nil)
			var reply struct {
				Records []struct{ Tool, Outcome, Policy string } `json:"records"`
			}
			return json.Unmarshal(body, &reply) == nil && slices.ContainsFunc(reply.Records, func(r struct{ Tool, Outcome, Policy string }) bool {
				return r.Tool == "metered_echo" && r.Policy == limit && r.Outcome == string(bus.CodeRateLimited)
			})
		})

		// One call in flight over every caller.
		const capped = "mcpServers.capped.quotas[0]"
		a0, b0 := refusals("mcpbus_toolcall_rate_limited_total", `limit="upstream_quota"`)
		held := q.start("alice", "capped_block", "")
		testkit.Eventually(t, 60*time.Second, "both toolcall replicas to refuse bob's capped call while alice's runs", func() bool {
			select {
			case out := <-held.done:
				// Bob's call held the slot when alice's came: hers was
				// refused; start it again.
				if be := bus.AsError(out.err); be == nil || be.Code != bus.CodeRateLimited {
					t.Fatalf("alice's capped call ended: %+v %v", out.r, out.err)
				}
				held = q.start("alice", "capped_block", "")
				return false
			default:
			}
			err := q.natsEcho("bob", "capped_echo")
			if err == nil {
				return false // alice's call has not taken its slot yet
			}
			if be := bus.AsError(err); be.Code != bus.CodeRateLimited || be.Details["policy"] != capped {
				t.Fatalf("bob's capped call: %v; want rate_limited naming %s", err, capped)
			}
			a, b := refusals("mcpbus_toolcall_rate_limited_total", `limit="upstream_quota"`)
			return a > a0 && b > b0
		})
		testkit.Eventually(t, 60*time.Second, "capped's quota_state to show alice's call in flight", func() bool {
			st := q.serverQuota("capped")
			return st.InFlight != nil && st.InFlight.Calls == 1 && st.InFlight.Replicas == 1
		})
		q.cancel(held)
		if out := testkit.Receive(t, 60*time.Second, "alice's capped call to end", held.done); out.err == nil {
			t.Fatalf("alice's cancelled call answered %+v", out.r)
		}
		for range 4 {
			if err := q.natsEcho("bob", "capped_echo"); err != nil {
				t.Fatalf("after alice's call ended: %v; want the slot free", err)
			}
		}
	})

	t.Run("a killed replica's slots expire", func(t *testing.T) {
		q.t = t
		// Calls of other callers until both replicas hold some.
		for i := 0; q.inFlight(setLimit).Replicas < 2; i++ {
			if i == 16 {
				t.Fatal("16 more calls all ran on one replica")
			}
			n := q.inFlight(setLimit).Calls
			q.start(fmt.Sprintf("user-%d", i), "demo_block", "agent-c")
			q.waitInFlight(setLimit, n+1)
		}
		if err := toolcallB.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = toolcallB.cmd.Wait()
		q.cancelAll()
		// Replica a's calls end and free their slots; b's stay counted
		// until their lease (30 s after their last renewal) runs out.
		testkit.Eventually(t, 60*time.Second, "only the killed replica's calls in flight", func() bool {
			f := q.inFlight(setLimit)
			return f.Replicas == 1 && f.Calls > 0
		})
		testkit.Eventually(t, 90*time.Second, "the killed replica's slots to expire", func() bool {
			return q.inFlight(setLimit).Calls == 0
		})
	})
}

// quotaStack drives the quota test's calls over NATS and reads its
// quota state.
type quotaStack struct {
	t     *testing.T
	nc    *nats.Conn
	names bus.Names
	admin string
	calls []*heldCall
}

// heldCall is a call started in the background.
type heldCall struct {
	user, id string
	done     chan callOutcome
}

// start runs tool as user (through set, "" for none) in the background.
func (q *quotaStack) start(user, tool, set string) *heldCall {
	h := &heldCall{user: user, id: fmt.Sprintf("q-%s-%d", user, len(q.calls)), done: make(chan callOutcome, 1)}
	q.calls = append(q.calls, h)
	req := bus.Call{Tool: tool, VirtualServer: set, UserID: user, ThreadID: "q", CallID: h.id}
	go func() {
		r, err := requestWithin[bus.ToolsCallReply](q.nc, q.names.ToolsCall(), req, 150*time.Second)
		h.done <- callOutcome{r, err}
	}()
	return h
}

// cancel cancels a call started by start.
func (q *quotaStack) cancel(h *heldCall) {
	body, _ := json.Marshal(bus.ToolsCancelRequest{CallID: h.id, UserID: h.user})
	if err := q.nc.Publish(q.names.ToolsCancel(), body); err != nil {
		q.t.Fatal(err)
	}
	_ = q.nc.Flush()
}

func (q *quotaStack) cancelAll() {
	for _, h := range q.calls {
		q.cancel(h)
	}
}

// natsEcho calls tool with a message as user over NATS.
func (q *quotaStack) natsEcho(user, tool string) error {
	_, err := request[bus.ToolsCallReply](q.nc, q.names.ToolsCall(), bus.Call{Tool: tool, UserID: user, ThreadID: "q", Arguments: json.RawMessage(`{"message": "hi"}`)})
	return err
}

// restEcho calls tool with a message with key over REST.
func (q *quotaStack) restEcho(base, key, tool string) error {
	status, _, body := vsREST(q.t, base, key, http.MethodPost, "/api/mcp/tools/"+tool+"/call", map[string]any{"arguments": map[string]any{"message": "hi"}})
	if status != http.StatusOK {
		return fmt.Errorf("%d %s", status, body)
	}
	return nil
}

// inFlightState is a concurrent quota's quota_state.in_flight.
type inFlightState struct {
	Calls, Replicas int
}

// inFlight reads limit's calls in flight from GET /api/mcp/virtual-servers.
func (q *quotaStack) inFlight(limit string) inFlightState {
	q.t.Helper()
	status, _, body := vsREST(q.t, q.admin, qKeyAdmin, http.MethodGet, "/api/mcp/virtual-servers", nil)
	var view struct {
		VirtualServers []struct {
			QuotaState []struct {
				Limit    string
				InFlight *inFlightState `json:"in_flight"`
			} `json:"quota_state"`
		} `json:"virtual_servers"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &view) != nil {
		q.t.Fatalf("GET /api/mcp/virtual-servers: %d %s", status, body)
	}
	for _, v := range view.VirtualServers {
		for _, s := range v.QuotaState {
			if s.Limit == limit && s.InFlight != nil {
				return *s.InFlight
			}
		}
	}
	q.t.Fatalf("no in_flight state of %s in %s", limit, body)
	return inFlightState{}
}

// serverState is one quota's quota_state.
type serverState struct {
	Limit  string
	Window *struct {
		Subjects, Calls int
	}
	InFlight *inFlightState `json:"in_flight"`
}

// serverQuota is server's first quota state in GET /api/mcp/servers.
func (q *quotaStack) serverQuota(server string) serverState {
	q.t.Helper()
	status, _, body := vsREST(q.t, q.admin, qKeyAdmin, http.MethodGet, "/api/mcp/servers?refresh=false", nil)
	var reply struct {
		Servers []struct {
			Name       string
			QuotaState []serverState `json:"quota_state"`
		}
	}
	if status != http.StatusOK || json.Unmarshal(body, &reply) != nil {
		q.t.Fatalf("GET /api/mcp/servers: %d %s", status, body)
	}
	for _, s := range reply.Servers {
		if s.Name == server && len(s.QuotaState) > 0 && s.QuotaState[0].Limit == "mcpServers."+server+".quotas[0]" {
			return s.QuotaState[0]
		}
	}
	q.t.Fatalf("no quota_state of %s in %s", server, body)
	return serverState{}
}

// waitInFlight waits until limit has n calls in flight.
func (q *quotaStack) waitInFlight(limit string, n int) {
	q.t.Helper()
	testkit.Eventually(q.t, 60*time.Second, fmt.Sprintf("%d calls in flight under %s", n, limit), func() bool { return q.inFlight(limit).Calls == n })
}

// metricSum is the sum of metric's samples whose labels contain labels in
// a Prometheus text exposition.
func metricSum(body, metric, labels string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, labels) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// startReplicated writes ext (extensions_config.json) and settings
// (config.yaml) into dir and runs discovery, two toolcall and two api
// processes there (serve mode), until each service is ready: api-a listens
// where settings say, api-b on apiB; toolcallArgs[i] are extra arguments
// of toolcall replica i. It returns the toolcall processes.
func startReplicated(t *testing.T, dir, natsURL string, names bus.Names, ext, settings, apiB string, toolcallArgs ...[]string) [2]*process {
	t.Helper()
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, dir, "discovery", mcpbusBin, "serve", "discovery")
	var toolcall [2]*process
	for i, name := range []string{"toolcall-a", "toolcall-b"} {
		args := []string{"serve", "toolcall"}
		if i < len(toolcallArgs) {
			args = append(args, toolcallArgs[i]...)
		}
		toolcall[i] = startProcess(t, dir, name, mcpbusBin, args...)
	}
	startProcess(t, dir, "api-a", mcpbusBin, "serve", "api")
	startProcessEnv(t, dir, "api-b", []string{"MCPBUS_API_LISTEN=" + apiB}, mcpbusBin, "serve", "api")
	waitHealthy(t, natsURL, names, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceAPI)
	return toolcall
}
