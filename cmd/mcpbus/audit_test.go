package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// `mcpbus audit tail` prints the newest records of the deployment's audit
// stream, filtered by --user and --tool, and with --follow keeps printing
// records written afterwards.
func TestAuditTail(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	w, err := audit.NewWriter(context.Background(), b.Connect(t), b.Names, audit.WriterOptions{Settings: config.DefaultAudit()})
	if err != nil {
		t.Fatal(err)
	}
	write := func(recs ...audit.Record) {
		for _, r := range recs {
			w.Write(context.Background(), r)
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	write(
		audit.Record{Kind: audit.KindCall, User: "alice", Thread: "t1", Tool: "demo_echo", Server: "demo", Transport: "stdio", Outcome: "ok", RequestID: "r-1"},
		audit.Record{Kind: audit.KindCall, User: "bob", Tool: "demo_add", Server: "demo", Outcome: "upstream_error"},
		audit.Record{Kind: audit.KindConfig, User: "root", Action: "put_config", Changes: []audit.Change{{Server: "web", Op: "added"}}},
		audit.Record{Kind: audit.KindCall, User: "alice", Tool: "demo_add", Server: "demo", Outcome: "tool_error"},
	)
	cmdOf := func(args ...string) *exec.Cmd {
		cmd := exec.Command(mcpbusBin, append(append([]string{"audit", "tail"}, args...), "--nats-url", b.URL, "--namespace", b.Names.Namespace())...)
		cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_NATS_NAMESPACE=", "MCPBUS_CONFIG=")
		cmd.Dir = t.TempDir()
		return cmd
	}
	lines := func(args ...string) []string {
		out, err := cmdOf(args...).Output() // stdout: stderr names the deployment
		if err != nil {
			t.Fatalf("audit tail %v: %v\n%s", args, err, out)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	all := lines()
	if len(all) != 4 || !strings.Contains(all[0], "user=alice thread=t1 tool=demo_echo server=demo transport=stdio outcome=ok") ||
		!strings.Contains(all[0], "request_id=r-1") || !strings.Contains(all[2], "config user=root action=put_config changes=[added web]") {
		t.Errorf("audit tail:\n%s", strings.Join(all, "\n"))
	}
	alice := lines("--user", "alice")
	if len(alice) != 2 || !strings.Contains(alice[0], "tool=demo_echo") || !strings.Contains(alice[1], "outcome=tool_error") {
		t.Errorf("--user alice:\n%s", strings.Join(alice, "\n"))
	}
	add := lines("--tool", "demo_add", "--json")
	if len(add) != 2 {
		t.Fatalf("--tool demo_add:\n%s", strings.Join(add, "\n"))
	}
	var r audit.Record
	if err := json.Unmarshal([]byte(add[0]), &r); err != nil || r.User != "bob" || r.Outcome != "upstream_error" {
		t.Errorf("--json line %q: %+v %v", add[0], r, err)
	}
	if last := lines("--limit", "1"); len(last) != 1 || !strings.Contains(last[0], "outcome=tool_error") {
		t.Errorf("--limit 1: %q", last)
	}

	// --follow: the history first, then a record written afterwards.
	cmd := cmdOf("--follow", "--user", "carol")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	write(audit.Record{Kind: audit.KindCall, User: "carol", Tool: "demo_echo", Outcome: "ok"})
	select {
	case line := <-got:
		if !strings.Contains(line, "user=carol") {
			t.Errorf("--follow printed %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("--follow printed nothing for the new record")
	}
}
