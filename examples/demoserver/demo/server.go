package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Version is the server version reported in the initialize result.
const Version = "0.1.0"

// MaxSlowSeconds bounds the slow tool's seconds argument.
const MaxSlowSeconds = 120

// Config configures [New].
type Config struct {
	// StateDir, when set, makes the task store persist every task as
	// <StateDir>/<task_id>.json. The directory is created if needed.
	StateDir string
	// ServerOptions are appended to the defaults (tool capabilities and
	// panic recovery), e.g. server.WithPaginationLimit(2).
	ServerOptions []server.ServerOption
	// Cancellations receives the block tool's counts (and those of the
	// transport wrappers sharing it). Defaults to a fresh one.
	Cancellations *Cancellations
	// Polls, when set, observes every get_report_status call.
	Polls *PollTracker
	// Faults adds the fault tools (hang, crash, malformed, huge; see
	// faults.go). RawOut is where malformed writes its garbage lines:
	// stdout over stdio, nil over HTTP.
	Faults bool
	RawOut io.Writer
	// Research, when set, adds research and research_stats (tasksext.go;
	// its Wrap and WrapStdio serve the 2026-07-28 tasks extension).
	Research *Research
	// Bridge adds the bridging tools (confirm, client_capabilities; see
	// bridge.go).
	Bridge bool
	// Logging declares the logging capability and adds log_levels
	// (logging.go).
	Logging bool
	// Federation adds resources, a template, a ui:// resource, a prompt,
	// completions and the link and widget tools (federation.go).
	Federation bool
}

// NewServer returns the demo server with an in-memory task store.
// opts are appended to the default server options.
func NewServer(opts ...server.ServerOption) *server.MCPServer {
	s, err := New(Config{ServerOptions: opts})
	if err != nil {
		// Only a StateDir can fail, and there is none.
		panic(err)
	}
	return s
}

// New returns the demo server configured by cfg.
func New(cfg Config) (*server.MCPServer, error) {
	store, err := newTaskStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithRecovery(),
	}
	if cfg.Federation {
		// Before cfg.ServerOptions: an -era option's hooks win.
		opts = append(opts, FederationOptions()...)
	}
	opts = append(opts, cfg.ServerOptions...)
	if cfg.Logging {
		opts = append(opts, server.WithLogging())
	}
	s := server.NewMCPServer("demo", Version, opts...)
	addBasicTools(s)
	addTaskTools(s, store, cfg.Polls)
	if cfg.Faults {
		addFaultTools(s, cfg.RawOut)
	}
	if cfg.Cancellations == nil {
		cfg.Cancellations = &Cancellations{}
	}
	addProgressTools(s, cfg.Cancellations)
	if cfg.Research != nil {
		cfg.Research.AddTools(s)
	}
	if cfg.Bridge {
		addBridgeTools(s)
	}
	if cfg.Logging {
		addLoggingTools(s)
	}
	if cfg.Federation {
		addFederation(s)
	}
	return s, nil
}

// WeatherReport is the weather tool's structured output.
type WeatherReport struct {
	City         string `json:"city"`
	TemperatureC int    `json:"temperature_c"`
	Conditions   string `json:"conditions"`
}

// Identity is the whoami tool's structured output.
type Identity struct {
	Headers map[string]string `json:"headers"`
	Cwd     string            `json:"cwd"`
	TmpDir  string            `json:"tmpdir"`
	Pid     int               `json:"pid"`
}

// readOnly marks a tool as reading nothing but its arguments.
var readOnly = mcp.WithToolAnnotation(mcp.ToolAnnotation{
	ReadOnlyHint:    mcp.ToBoolPtr(true),
	DestructiveHint: mcp.ToBoolPtr(false),
	IdempotentHint:  mcp.ToBoolPtr(true),
	OpenWorldHint:   mcp.ToBoolPtr(false),
})

func addBasicTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns the message unchanged."),
		mcp.WithString("message", mcp.Required(), mcp.Description("Text to echo.")),
		readOnly,
	), echo)

	s.AddTool(mcp.NewTool("add",
		mcp.WithDescription("Adds two numbers."),
		mcp.WithNumber("a", mcp.Required()),
		mcp.WithNumber("b", mcp.Required()),
		readOnly,
	), add)

	s.AddTool(mcp.NewTool("weather",
		mcp.WithDescription("Reports the (always sunny) weather for a city."),
		mcp.WithString("city", mcp.Required()),
		mcp.WithOutputSchema[WeatherReport](),
		readOnly,
	), weather)

	s.AddTool(mcp.NewTool("slow",
		mcp.WithDescription("Sleeps for the given number of seconds, then answers."),
		mcp.WithNumber("seconds", mcp.DefaultNumber(2.0), mcp.Min(0.0), mcp.Max(float64(MaxSlowSeconds))),
	), slow)

	s.AddTool(mcp.NewTool("fail",
		mcp.WithDescription("Always fails with a tool error (isError) carrying the message."),
		mcp.WithString("message"),
	), fail)

	s.AddTool(mcp.NewTool("whoami",
		mcp.WithDescription("Reports the X-* and Authorization request headers, the working directory, TMPDIR and pid."),
		readOnly,
	), whoami)
}

func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(msg), nil
}

func add(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, err := req.RequireFloat("a")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	b, err := req.RequireFloat("b")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	sum := a + b
	return mcp.NewToolResultStructured(map[string]float64{"sum": sum}, formatNumber(sum)), nil
}

func weather(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	city, err := req.RequireString("city")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	// A struct keeps the field order city, temperature_c, conditions on the
	// wire, which tests use to check that bytes pass through unchanged.
	return mcp.NewToolResultStructuredOnly(WeatherReport{City: city, TemperatureC: 21, Conditions: "sunny"}), nil
}

func slow(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	seconds := req.GetFloat("seconds", 2)
	if seconds < 0 || seconds > MaxSlowSeconds {
		return mcp.NewToolResultError(fmt.Sprintf("seconds must be between 0 and %d", MaxSlowSeconds)), nil
	}
	timer := time.NewTimer(time.Duration(seconds * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
	}
	return mcp.NewToolResultText("done after " + formatNumber(seconds) + "s"), nil
}

func fail(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError(req.GetString("message", "failure requested")), nil
}

func whoami(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := Identity{
		Headers: selectHeaders(req.Header),
		TmpDir:  os.Getenv("TMPDIR"),
		Pid:     os.Getpid(),
	}
	if wd, err := os.Getwd(); err == nil {
		id.Cwd = wd
	}
	text, err := json.Marshal(id.Headers)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructured(id, string(text)), nil
}

// selectHeaders keeps the X-* and Authorization headers, canonically named,
// with repeated values joined by ", ". Over stdio h is nil and so is the
// result's content: an empty object.
func selectHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if ck != "Authorization" && !strings.HasPrefix(ck, "X-") {
			continue
		}
		out[ck] = strings.Join(vs, ", ")
	}
	return out
}

func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
