package toolcall_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// The fake MCP server records every request it receives. As a stdio server
// it is this test binary re-executed with TOOLCALL_FAKE=stdio; it appends
// one JSON line per request to $FAKE_RECORD. Over HTTP it runs in process
// behind a handler that records each HTTP request.

func TestMain(m *testing.M) {
	if os.Getenv("TOOLCALL_FAKE") == "stdio" {
		runFakeStdio()
		return
	}
	// Orphaned grandchildren of stdio servers are re-parented to the test
	// process, so closing a session can reap them and tests can see them gone.
	if err := mcpclient.EnableSubreaper(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintln(os.Stderr, "enabling subreaper:", err)
		os.Exit(1)
	}
	// Personal stdio servers name a bare command of their launch spec,
	// found on the children's PATH (personal_connections.path), and may
	// run as an unprivileged uid: put a copy of the fake, executable by
	// anyone, in a directory anyone can search, and on the gateway's PATH.
	binDir, err := os.MkdirTemp("", "toolcall-fake-bin-")
	if err == nil {
		err = os.Chmod(binDir, 0o755)
	}
	if err == nil {
		err = copyExecutable(os.Args[0], filepath.Join(binDir, fakeCommand))
	}
	if err == nil {
		err = os.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "installing the fake on PATH:", err)
		os.Exit(1)
	}
	fakeBinDir = binDir
	code := m.Run()
	_ = os.RemoveAll(binDir)
	os.Exit(code)
}

// fakeBinDir holds the fake as fakeCommand (set by TestMain).
var fakeBinDir string

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}

// record is one request as the fake saw it.
type record struct {
	Method  string            `json:"method"`           // JSON-RPC method
	Tool    string            `json:"tool,omitempty"`   // tools/call name
	Args    json.RawMessage   `json:"args,omitempty"`   // tools/call arguments
	Meta    json.RawMessage   `json:"meta,omitempty"`   // params._meta
	Headers map[string]string `json:"headers"`          // HTTP only
	Status  int               `json:"status,omitempty"` // HTTP status the fake answered with
	Pid     int               `json:"pid,omitempty"`    // stdio only
	Session string            `json:"session,omitempty"`
}

// fakeLegacyVersions are what the fakes' server/discover lists: no
// 2026-07-28, so mcpbus speaks the legacy era (with sessions) to them.
var fakeLegacyVersions = []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326}

func runFakeStdio() {
	if os.Getenv("FAKE_HANG_INIT") == "1" {
		select {} // never answers initialize
	}
	fmt.Fprintln(os.Stderr, "fake stdio server starting:", os.Getenv("FAKE_STDERR_MARK"))
	path := os.Getenv("FAKE_RECORD")
	var mu sync.Mutex
	rec := func(r record) {
		if path == "" {
			return
		}
		r.Pid = os.Getpid()
		b, _ := json.Marshal(r)
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		_, _ = f.Write(append(b, '\n'))
		_ = f.Close()
	}
	hooks := &server.Hooks{}
	hooks.AddBeforeAny(func(_ context.Context, _ any, method mcp.MCPMethod, message any) {
		r := record{Method: string(method)}
		if call, ok := message.(*mcp.CallToolRequest); ok {
			r.Tool = call.Params.Name
			r.Args, _ = json.Marshal(call.Params.Arguments)
			if call.Params.Meta != nil {
				r.Meta, _ = json.Marshal(call.Params.Meta.AdditionalFields)
			}
		}
		rec(r)
	})
	// A legacy server (server/discover without 2026-07-28), as the session
	// tests assume; modern_test.go covers the modern era.
	// With FAKE_ERA=modern it is modern-only: initialize is refused and
	// server/discover lists 2026-07-28 alone.
	versions := fakeLegacyVersions
	if os.Getenv("FAKE_ERA") == "modern" {
		versions = []string{mcp.ProtocolVersion20260728}
		hooks.AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
			raw, _ := message.(json.RawMessage)
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(raw, &m) == nil && m.Method == string(mcp.MethodInitialize) {
				return errors.New("modern-only fake: initialize refused")
			}
			return nil
		})
	}
	era := server.WithStdioContextFunc(func(ctx context.Context) context.Context {
		return server.WithSupportedProtocolVersions(ctx, versions)
	})
	if err := server.ServeStdio(newFake(hooks), era); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// identity is the fake whoami tool's structured content.
type identity struct {
	Pid     int      `json:"pid"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
	EnvKeys []string `json:"env_keys"` // every variable's name
	// GatewayEnviron is what reading the parent's (the gateway's)
	// /proc/<pid>/environ gave: "readable" or the error.
	GatewayEnviron string            `json:"gateway_environ"`
	Cwd            string            `json:"cwd"`
	Env            map[string]string `json:"env"`
	Meta           map[string]any    `json:"meta"`
	Headers        map[string]string `json:"headers"`
	Args           map[string]any    `json:"args"`
}

// newFake builds the fake server: echo, whoami, fail, crash, spawn, probe, sleep,
// block (until the test releases it: newFifo, releaseFifo), progress (three notifications/progress, then _meta), content (one block
// of every kind).
func newFake(hooks *server.Hooks) *server.MCPServer {
	opts := []server.ServerOption{server.WithToolCapabilities(false)}
	if hooks != nil {
		opts = append(opts, server.WithHooks(hooks))
	}
	s := server.NewMCPServer("fake", "1.0.0", opts...)
	s.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(r.GetString("message", "")), nil
	})
	s.AddTool(mcp.NewTool("whoami"), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id := identity{Pid: os.Getpid(), UID: os.Getuid(), GID: os.Getgid(), Env: map[string]string{}, Headers: map[string]string{}, Args: r.GetArguments()}
		id.Cwd, _ = os.Getwd()
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			id.EnvKeys = append(id.EnvKeys, k)
		}
		id.GatewayEnviron = "readable"
		if _, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid())); err != nil {
			id.GatewayEnviron = err.Error()
		}
		for _, k := range []string{"TMPDIR", "TMP", "TEMP", "FAKE_MARK", "PWD"} {
			if v, ok := os.LookupEnv(k); ok {
				id.Env[k] = v
			}
		}
		if r.Params.Meta != nil {
			id.Meta = r.Params.Meta.AdditionalFields
		}
		for k := range r.Header {
			id.Headers[k] = r.Header.Get(k)
		}
		return mcp.NewToolResultStructuredOnly(id), nil
	})
	s.AddTool(mcp.NewTool("fail", mcp.WithString("message")), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError(r.GetString("message", "boom")), nil
	})
	s.AddTool(mcp.NewTool("crash"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(mcp.NewTool("spawn"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A grandchild in the server's process group, as npx or sh -c leave.
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultStructuredOnly(map[string]int{"pid": cmd.Process.Pid}), nil
	})
	s.AddTool(mcp.NewTool("escape"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A grandchild that calls setsid: its own session and process
		// group, out of reach of a kill of the server's group.
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultStructuredOnly(map[string]int{"pid": cmd.Process.Pid}), nil
	})
	s.AddTool(mcp.NewTool("probe"), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// What a server that can read files can reach: it reads, lists and
		// writes the given paths and answers, for each, "ok: <what it
		// got>" or the error.
		out := map[string]string{}
		args := r.GetArguments()
		for op, list := range args {
			paths, _ := list.([]any)
			for _, p := range paths {
				path, _ := p.(string)
				var got string
				var err error
				switch op {
				case "read":
					var b []byte
					b, err = os.ReadFile(path)
					got = string(b)
				case "list":
					var entries []os.DirEntry
					entries, err = os.ReadDir(path)
					got = fmt.Sprint(len(entries), " entries")
				case "write":
					err = os.WriteFile(path, []byte("registry=http://attacker.invalid/\n"), 0o644)
				}
				out[op+" "+path] = "ok: " + got
				if err != nil {
					out[op+" "+path] = err.Error()
				}
			}
		}
		return mcp.NewToolResultStructuredOnly(out), nil
	})
	s.AddTool(mcp.NewTool("sleep", mcp.WithNumber("ms")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(r.GetFloat("ms", 1000)) * time.Millisecond):
		}
		return mcp.NewToolResultText("slept"), nil
	})
	s.AddTool(mcp.NewTool("block", mcp.WithString("fifo")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Blocks until the test writes a byte to the named pipe fifo
		// (releaseFifo), or the call is cancelled.
		f, err := os.OpenFile(r.GetString("fifo", ""), os.O_RDWR, 0)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		defer f.Close()
		read := make(chan error, 1)
		go func() { _, err := f.Read(make([]byte, 1)); read <- err }()
		select {
		case <-ctx.Done():
			return mcp.NewToolResultError("cancelled"), nil
		case err := <-read:
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
		}
		return mcp.NewToolResultText("released"), nil
	})
	s.AddTool(mcp.NewTool("progress"), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Three notifications/progress, then a result with _meta, the
		// notifications written first (demo.SettleNotifications).
		if r.Params.Meta != nil && r.Params.Meta.ProgressToken != nil {
			for i := 1; i <= 3; i++ {
				_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
					map[string]any{"progressToken": r.Params.Meta.ProgressToken, "progress": i, "total": 3})
			}
			demo.SettleNotifications(ctx)
		}
		res := mcp.NewToolResultText("progressed")
		res.Meta = mcp.NewMetaFromMap(map[string]any{"fake/steps": 3})
		return res, nil
	})
	s.AddTool(mcp.NewTool("content"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content: []mcp.Content{
				mcp.NewTextContent("hello"),
				mcp.NewImageContent("aW1n", "image/png"),
				mcp.NewAudioContent("YXVk", "audio/wav"),
				mcp.NewResourceLink("file:///tmp/report.txt", "report", "a report", "text/plain"),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "embedded"}),
			},
			StructuredContent: map[string]any{"n": 5, "ok": true},
		}, nil
	})
	return s
}

// httpFake is the fake over streamable HTTP or SSE, recording every HTTP
// request.
type httpFake struct {
	*httptest.Server
	URL string // the MCP endpoint

	mu      sync.Mutex
	records []record
	// forget makes the next request carrying a session id fail with 404
	// (as if the server restarted); forgetAlways does it every time.
	forget, forgetAlways atomic.Bool
	// echo500 answers tools/call with a 500 whose body repeats every header
	// value, as careless upstreams do.
	echo500 atomic.Bool
}

func newHTTPFake(t testing.TB, sse bool) *httpFake {
	t.Helper()
	f := &httpFake{}
	mcpSrv := newFake(nil)
	var inner http.Handler
	if sse {
		inner = server.NewSSEServer(mcpSrv)
	} else {
		inner = server.NewStreamableHTTPServer(mcpSrv, server.WithStreamableHTTPProtocolVersions(fakeLegacyVersions...))
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := record{Headers: map[string]string{}, Session: r.Header.Get("Mcp-Session-Id")}
		for k := range r.Header {
			rec.Headers[k] = strings.Join(r.Header.Values(k), "\x00")
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
					Meta      json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &msg)
			rec.Method, rec.Tool, rec.Args, rec.Meta = msg.Method, msg.Params.Name, msg.Params.Arguments, msg.Params.Meta
		} else {
			rec.Method = r.Method
		}
		hasSession := rec.Session != "" || r.URL.Query().Get("sessionId") != ""
		if hasSession && r.Method == http.MethodPost && (f.forgetAlways.Load() || f.forget.CompareAndSwap(true, false)) {
			rec.Status = http.StatusNotFound
			f.add(rec)
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if rec.Method == "tools/call" && f.echo500.Load() {
			rec.Status = http.StatusInternalServerError
			f.add(rec)
			var vals []string
			for _, v := range rec.Headers {
				vals = append(vals, v)
			}
			http.Error(w, "upstream exploded; request headers: "+strings.Join(vals, " | "), http.StatusInternalServerError)
			return
		}
		f.add(rec)
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Server.Close)
	if sse {
		f.URL = f.Server.URL + "/sse"
	} else {
		f.URL = f.Server.URL + "/mcp"
	}
	return f
}

func (f *httpFake) add(r record) {
	f.mu.Lock()
	f.records = append(f.records, r)
	f.mu.Unlock()
}

// all returns every recorded request.
func (f *httpFake) all() []record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]record(nil), f.records...)
}

// calls returns the recorded requests with the JSON-RPC method.
func (f *httpFake) calls(method string) []record {
	var out []record
	for _, r := range f.all() {
		if r.Method == method && r.Status == 0 {
			out = append(out, r)
		}
	}
	return out
}

// readRecords reads a stdio fake's record file.
func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func countMethod(rs []record, method string) int {
	n := 0
	for _, r := range rs {
		if r.Method == method {
			n++
		}
	}
	return n
}

// gone reports whether pid no longer runs (gone, or a zombie nobody reaped yet).
func gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// exited reports whether pid, a child of this process, has exited and can
// be waited for (waitid WEXITED|WNOHANG|WNOWAIT: nothing is reaped).
func exited(pid int) bool {
	var info [128]byte // siginfo_t; si_signo stays 0 unless the child exited
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, 1 /* P_PID */, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), 0x4|0x1|0x1000000, 0, 0)
	return errno != 0 || info[0] != 0
}

// newFifo makes a named pipe for the fake's block tool.
func newFifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return path
}

// releaseFifo ends the block call waiting on the pipe at path.
func releaseFifo(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	if _, err := f.Write([]byte{1}); err != nil {
		t.Fatalf("release %s: %v", path, err)
	}
}
