package demo_test

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

// TestInitWaitHoldsOnlyInitializeUntilTheGateOpens: lines before an
// initialize pass at once; the initialize line and what follows it arrive
// only once the gate file exists.
func TestInitWaitHoldsOnlyInitializeUntilTheGateOpens(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "gate")
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	r := bufio.NewReader(demo.InitWait{Gate: gate}.Reader(pr))
	lines := make(chan string, 4)
	go func() {
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(l)
		}
	}()
	go func() {
		_, _ = io.WriteString(pw, `{"jsonrpc":"2.0","method":"notifications/x"}`+"\n")
		_, _ = io.WriteString(pw, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n")
	}()
	if got := <-lines; !strings.Contains(got, "notifications/x") {
		t.Fatalf("first line %q", got)
	}
	select {
	case got := <-lines:
		t.Fatalf("initialize passed with the gate closed: %q", got)
	case <-time.After(200 * time.Millisecond):
		// Held, as expected; a held line can only be shown absent over
		// some interval.
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-lines:
		if !strings.Contains(got, `"initialize"`) {
			t.Fatalf("second line %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("initialize still held after the gate opened")
	}
}
