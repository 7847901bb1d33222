package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// The README's tour: its section, and the addresses `make run` uses, which
// the test replaces with free ones.
const (
	readmePath    = "../../README.md"
	tourHeading   = "## A five-minute tour"
	tourAPIAddr   = "127.0.0.1:8001"
	tourDemoAddr  = "127.0.0.1:8765"
	tourBlockWait = 30 * time.Second
	// tourRetryEvery spaces the runs of a block that did not succeed yet.
	tourRetryEvery = 500 * time.Millisecond
)

// tourStep is one fenced block of the tour: a shell block to run (with the
// text block after it: what its output must contain), or a server entry
// the reader adds to extensions_config.json.
type tourStep struct {
	shell  string
	expect []string
	server string
}

// TestReadmeTour runs the README's five-minute tour as written: `make run`
// (the example configs copied into a fresh directory beside bin/, the demo
// server over HTTP, `mcpbus dev`), then every ```sh block of the tour with
// bash from that directory, each of which must succeed and print what the
// ```text block after it shows; a ```json server entry is added to
// extensions_config.json as the tour tells the reader to.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	steps := tourSteps(t)
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	local := strings.NewReplacer(tourAPIAddr, apiAddr, tourDemoAddr, demoAddr)

	// make run: bin/, the example configs, the demo server, mcpbus dev.
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, bin := range map[string]string{"mcpbus": mcpbusBin, "demo-server": demoBin} {
		if err := os.Symlink(bin, filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	for example, name := range map[string]string{"extensions_config.example.json": "extensions_config.json", "config.example.yaml": "config.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples", example))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(local.Replace(string(data))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, dir, "demo-server", filepath.Join(dir, "bin", "demo-server"), "-transport", "http", "-addr", demoAddr)
	dev := startProcessEnv(t, dir, "dev", []string{"MCPBUS_API_LISTEN=" + apiAddr}, filepath.Join(dir, "bin", "mcpbus"), "dev", "--nats-port", "-1")
	testkit.Eventually(t, 60*time.Second, "mcpbus dev to say it is running", func() bool {
		return strings.Contains(dev.out.String(), "mcpbus dev is running")
	})

	for i, step := range steps {
		if step.server != "" {
			addServerEntry(t, filepath.Join(dir, "extensions_config.json"), local.Replace(step.server))
			continue
		}
		runTourBlock(t, dir, i, local.Replace(step.shell), step.expect)
	}
}

// runTourBlock runs one shell block until it succeeds with the expected
// output: a configuration change reaches every service within about a
// second, so a block right after one may need another try.
func runTourBlock(t *testing.T, dir string, i int, script string, expect []string) {
	t.Helper()
	var last string
	var ran time.Time
	done := false
	defer func() {
		if !done {
			t.Logf("tour block %d:\n%s\nlast run, %s", i, script, last)
		}
	}()
	testkit.Eventually(t, tourBlockWait, fmt.Sprintf("tour block %d to succeed", i), func() bool {
		if time.Since(ran) < tourRetryEvery {
			return false
		}
		ran = time.Now()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL=")
		out, err := cmd.CombinedOutput()
		last = fmt.Sprintf("exit: %v\n%s", err, out)
		if err != nil {
			return false
		}
		for _, want := range expect {
			if !strings.Contains(string(out), want) {
				last += fmt.Sprintf("\n(missing %q)", want)
				return false
			}
		}
		return true
	})
	done = true
}

// addServerEntry puts the tour's `"name": {…}` member into mcpServers.
func addServerEntry(t *testing.T, path, member string) {
	t.Helper()
	var entry map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+member+"}"), &entry); err != nil || len(entry) != 1 {
		t.Fatalf("the tour's server entry is not one JSON member: %v\n%s", err, member)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]json.RawMessage // other top-level keys are kept
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(file["mcpServers"], &servers); err != nil {
		t.Fatal(err)
	}
	for n, v := range entry {
		servers[n] = v
	}
	if file["mcpServers"], err = json.Marshal(servers); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// tourSteps reads the tour's fenced blocks from the README.
func tourSteps(t *testing.T) []tourStep {
	t.Helper()
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, tour, found := strings.Cut(string(data), "\n"+tourHeading+"\n")
	if !found {
		t.Fatalf("README.md has no %q section", tourHeading)
	}
	if end := strings.Index(tour, "\n## "); end >= 0 {
		tour = tour[:end]
	}
	var steps []tourStep
	for _, b := range fencedBlocks(tour) {
		switch {
		case b.lang == "sh":
			steps = append(steps, tourStep{shell: b.body})
		case b.lang == "text" && len(steps) > 0 && steps[len(steps)-1].shell != "":
			for line := range strings.SplitSeq(b.body, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					steps[len(steps)-1].expect = append(steps[len(steps)-1].expect, line)
				}
			}
		case b.lang == "json" && strings.HasPrefix(b.body, `"`):
			steps = append(steps, tourStep{server: b.body})
		}
	}
	var shells int
	for _, s := range steps {
		if s.shell != "" {
			shells++
		}
	}
	if shells < 5 {
		t.Fatalf("the tour has %d ```sh blocks; it should show the catalog, calls over REST, NATS and /mcp, and adding servers", shells)
	}
	return steps
}

type fenced struct{ lang, body string }

// fencedBlocks are the ``` blocks of a Markdown text, in order.
func fencedBlocks(md string) []fenced {
	var out []fenced
	var cur *fenced
	var body []string
	for line := range strings.SplitSeq(md, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fenced{lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			body = nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.body = strings.Join(body, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	return out
}
