package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Binaries are the executables built from the tree under test.
type Binaries struct {
	MCPBus string
	Demo   string
}

// All lists them, for finding processes left behind.
func (b Binaries) All() []string { return []string{b.MCPBus, b.Demo} }

// Service names the deployment's processes: the service and, for the
// replicated ones, the replica ("toolcall-1").
var (
	ServiceProcs = []string{"tokens", "discovery", "toolcall-1", "toolcall-2", "taskpoller-1", "taskpoller-2", "api"}
	// Services is the start order of a fresh deployment.
	Services = []string{"tokens", "discovery", "toolcall", "taskpoller", "api"}
)

// serviceOf is the service a process name runs ("toolcall-2" → "toolcall").
func serviceOf(proc string) string {
	s, _, _ := strings.Cut(proc, "-")
	return s
}

// Deployment is one mcpbus deployment: its processes, its NATS server, its
// database and its upstreams (the demo server over HTTP twice: demohttp with
// the report tasks, faultyhttp with the fault tools; and over stdio, demo
// and faulty, started by toolcall per thread).
type Deployment struct {
	Bins    Binaries
	Root    string
	NATS    *NATSServer
	DBURL   string
	APIAddr string
	// names are the deployment's NATS names: the default ones (the
	// deployment has a NATS server of its own).
	names bus.Names

	// Procs are the service processes by name (ServiceProcs).
	Procs map[string]*Proc
	// DemoHTTP and FaultyHTTP are the HTTP upstreams.
	DemoHTTP, FaultyHTTP *Proc
	demoHTTPPort         int

	// ConfigEpoch is bumped by EditExtensions: it is part of every
	// server's description, so a restarted deployment can be checked to
	// serve the edited file.
	ConfigEpoch int
	// ExtensionsAtAPIOnly keeps extensions_config.json in the api's
	// directory only (written by the next EditExtensions).
	ExtensionsAtAPIOnly bool

	// NATSURLOf overrides the NATS URL of single processes (by name): a
	// process in a network namespace of its own reaches its own node only.
	NATSURLOf map[string]string
	// NATSReplicas is nats.replicas when set (else auto).
	NATSReplicas int

	nc *nats.Conn
}

// Settings of the chaos deployment: short polls and leases so takeovers
// happen within the suite's patience.
const (
	PollIntervalSeconds = 1
	LeaseSeconds        = 5
	// CallTimeout is the timeout of every load call; HungAfter is when a
	// call without an answer counts as hung.
	CallTimeout = 10 * time.Second
	HungAfter   = CallTimeout + 2*time.Second
	// FaultyCallTimeout is the tool_call_timeout of the faulty servers.
	FaultyCallTimeout = 4
)

// NewDeployment writes the configuration under root and starts the
// upstreams; StartServices starts the services.
func NewDeployment(bins Binaries, root string, ns *NATSServer, dbURL string) (*Deployment, error) {
	return NewDeploymentOn(bins, root, ns, dbURL, "127.0.0.1")
}

// NewDeploymentOn is NewDeployment with the HTTP upstreams listening on
// host (an address processes in other network namespaces reach).
func NewDeploymentOn(bins Binaries, root string, ns *NATSServer, dbURL, host string) (*Deployment, error) {
	apiPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	d := &Deployment{Bins: bins, Root: root, NATS: ns, DBURL: dbURL, APIAddr: fmt.Sprintf("127.0.0.1:%d", apiPort), Procs: map[string]*Proc{}}
	if d.demoHTTPPort, err = FreePort(); err != nil {
		return nil, err
	}
	faultyPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	d.DemoHTTP = &Proc{Name: "demohttp", Bin: bins.Demo, Dir: root, Args: []string{"-transport", "http",
		"-addr", net.JoinHostPort(host, strconv.Itoa(d.demoHTTPPort)), "-state-dir", filepath.Join(root, "demohttp-state"),
		"-poll-stats", "-poll-min-gap", "500ms"}}
	d.FaultyHTTP = &Proc{Name: "faultyhttp", Bin: bins.Demo, Dir: root, Args: []string{"-transport", "http",
		"-addr", net.JoinHostPort(host, strconv.Itoa(faultyPort)), "-faults"}}
	for _, p := range []*Proc{d.DemoHTTP, d.FaultyHTTP} {
		if err := d.StartUpstream(p); err != nil {
			return nil, err
		}
	}
	for _, name := range ServiceProcs {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		d.Procs[name] = &Proc{Name: name, Bin: bins.MCPBus, Dir: dir, Args: []string{"serve", serviceOf(name)},
			Env: []string{"MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL=", "MCPBUS_CONFIG=", "MCPBUS_EXTENSIONS_CONFIG="}}
	}
	if err := d.writeConfig(); err != nil {
		return nil, err
	}
	// Like the services' connections (bus.Connect), no reconnect buffer: a call
	// that gave up during a NATS restart is never delivered after it.
	nc, err := nats.Connect(ns.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1), nats.Name("chaos-harness"))
	if err != nil {
		return nil, err
	}
	d.nc = nc
	return d, nil
}

// NC is the harness's own connection to the deployment's NATS.
func (d *Deployment) NC() *nats.Conn { return d.nc }

// StartUpstream starts an HTTP upstream and waits for its port.
func (d *Deployment) StartUpstream(p *Proc) error {
	if err := p.Start(); err != nil {
		return err
	}
	return waitTCP(p.Args[3], 20*time.Second)
}

// extensions is the deployment's extensions config for the current epoch.
func (d *Deployment) extensions() string {
	desc := fmt.Sprintf("chaos epoch %d", d.ConfigEpoch)
	return fmt.Sprintf(`{"mcpServers": {
	"demo": {"type": "stdio", "command": %[1]q, "description": %[4]q},
	"faulty": {"type": "stdio", "command": %[1]q, "args": ["-faults"], "tool_call_timeout": %[5]d, "description": %[4]q},
	"demohttp": {"type": "http", "url": "http://%[2]s/mcp", "description": %[4]q, "tool_call_timeout": 8,
		"headers": {"X-Chaos-Epoch": "%[6]d"},
		"task_toolsets": [{"name": "reports", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]},
	"faultyhttp": {"type": "http", "url": "http://%[3]s/mcp", "tool_call_timeout": %[5]d, "description": %[4]q}
}}`, d.Bins.Demo, d.DemoHTTP.Args[3], d.FaultyHTTP.Args[3], desc, FaultyCallTimeout, d.ConfigEpoch)
}

// EditExtensions changes every server's description and the demohttp
// server's X-Chaos-Epoch header (which demohttp_whoami reports): an edit of a task-enabled server, as an operator makes
// between two restarts.
func (d *Deployment) EditExtensions() error {
	d.ConfigEpoch++
	return d.writeConfig()
}

func (d *Deployment) writeConfig() error {
	ext := d.extensions()
	for _, p := range d.Procs {
		settings := fmt.Sprintf(`nats:
  url: %s
database:
  backend: postgres
  url: %q
api:
  listen: %s
workspace:
  root: %s
mcp_tasks:
  enabled: true
  poll_interval_seconds: %d
  lease_seconds: %d
  max_concurrent_polls: 16
log:
  level: %s
`, cmp.Or(d.NATSURLOf[p.Name], d.NATS.URL), d.DBURL, d.APIAddr, filepath.Join(p.Dir, "workspace"), PollIntervalSeconds, LeaseSeconds, LogLevel)
		if d.NATSReplicas > 0 {
			settings = strings.Replace(settings, "nats:\n", fmt.Sprintf("nats:\n  replicas: %d\n", d.NATSReplicas), 1)
		}
		files := map[string]string{"config.yaml": settings, "extensions_config.json": ext}
		if d.ExtensionsAtAPIOnly && serviceOf(p.Name) != "api" {
			delete(files, "extensions_config.json")
			if err := os.Remove(filepath.Join(p.Dir, "extensions_config.json")); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(p.Dir, name), []byte(content), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// StartServices starts every service process in the order of services
// (service names; a replicated service starts both replicas), without
// waiting between them.
func (d *Deployment) StartServices(services []string) error {
	for _, svc := range services {
		for _, name := range ServiceProcs {
			if serviceOf(name) == svc {
				if err := d.Procs[name].Start(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// StopServices stops every service with SIGTERM; it returns the ones that
// needed a SIGKILL.
func (d *Deployment) StopServices() []string {
	var slow []string
	for i := len(ServiceProcs) - 1; i >= 0; i-- {
		if p := d.Procs[ServiceProcs[i]]; !p.Stop(30 * time.Second) {
			slow = append(slow, p.Name)
		}
	}
	return slow
}

// Close stops everything the deployment started (not the NATS server).
func (d *Deployment) Close() {
	d.StopServices()
	d.DemoHTTP.Stop(10 * time.Second)
	d.FaultyHTTP.Stop(10 * time.Second)
	if d.nc != nil {
		d.nc.Close()
	}
}

// replicas counts the instances of a micro service answering a ping.
func (d *Deployment) replicas(service string) int {
	inbox := nats.NewInbox()
	sub, err := d.nc.SubscribeSync(inbox)
	if err != nil {
		return 0
	}
	defer func() { _ = sub.Unsubscribe() }()
	subj, _ := micro.ControlSubject(micro.PingVerb, service, "")
	if err := d.nc.PublishRequest(subj, inbox, nil); err != nil {
		return 0
	}
	n := 0
	for {
		if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
			return n
		}
		n++
	}
}

// healthy reports whether every service answers its health subject as
// ready, with two toolcall and two taskpoller replicas.
func (d *Deployment) healthy() error {
	for _, svc := range []string{bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h, err := bus.Request[bus.HealthReply](ctx, d.nc, d.names.Health(svc), struct{}{})
		cancel()
		if err != nil || !h.Ready {
			return fmt.Errorf("%s not ready (%v)", svc, err)
		}
	}
	for _, svc := range []string{bus.ServiceToolcall, bus.ServiceTaskpoller} {
		if n := d.replicas(svc); n != 2 {
			return fmt.Errorf("%s has %d replicas answering, want 2", svc, n)
		}
	}
	return nil
}

// Call makes one mcpbus.tools.call over NATS with the load's timeout.
// ctx carries the request id, if any.
func (d *Deployment) Call(ctx context.Context, tool, thread, args string) (bus.ToolsCallReply, error) {
	ctx, cancel := context.WithTimeout(ctx, HungAfter)
	defer cancel()
	return bus.Request[bus.ToolsCallReply](ctx, d.nc, d.names.ToolsCall(), bus.Call{
		Tool: tool, UserID: "chaos", ThreadID: thread, Arguments: json.RawMessage(args), TimeoutMS: CallTimeout.Milliseconds()})
}

// Ready reports whether the deployment serves: every service healthy, a
// stdio and an HTTP call succeed on a fresh thread and the catalog carries
// the current config epoch and the report tasks.
func (d *Deployment) Ready() error {
	if err := d.healthy(); err != nil {
		return err
	}
	thread := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	for _, tool := range []string{"demo_echo", "demohttp_echo"} {
		r, err := d.Call(context.Background(), tool, thread, `{"message":"probe"}`)
		if err != nil || r.IsError {
			return fmt.Errorf("%s: %v", tool, err)
		}
	}
	r, err := d.Call(context.Background(), "demohttp_whoami", thread, `{}`)
	if err != nil {
		return fmt.Errorf("demohttp_whoami: %w", err)
	}
	var who struct {
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(r.StructuredContent, &who); err != nil {
		return fmt.Errorf("demohttp_whoami: %w", err)
	}
	if got, want := who.Headers["X-Chaos-Epoch"], fmt.Sprint(d.ConfigEpoch); got != want {
		return fmt.Errorf("demohttp is called with config epoch %q, want %q", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := bus.ListCatalog(ctx, d.nc, d.names.ToolsList(), bus.ToolsListRequest{UserID: "chaos"})
	if err != nil {
		return fmt.Errorf("tools list: %w", err)
	}
	for _, t := range list.Tools {
		if t.Name == "demohttp_submit_report" && t.TaskToolset == "reports" {
			return nil
		}
	}
	return fmt.Errorf("the catalog has no task tool demohttp_submit_report (failed servers %v)", list.FailedServers)
}

// WaitReady waits until Ready succeeds or timeout passes.
func (d *Deployment) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := d.Ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deployment not ready after %s: %w", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PollStats is the demo server's status-call counts (demo.PollStats; the
// JSON of its /debug/polls endpoint).
type PollStats struct {
	Calls    int      `json:"calls"`
	Tasks    int      `json:"tasks"`
	Overlaps int      `json:"overlaps"`
	TooClose int      `json:"too_close"`
	Examples []string `json:"examples"`
}

// PollStats reads the demohttp upstream's status-call counts.
func (d *Deployment) PollStats() (PollStats, error) {
	var s PollStats
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(fmt.Sprintf("http://%s/debug/polls", d.DemoHTTP.Args[3]))
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}
