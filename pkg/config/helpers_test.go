package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parse parses an extensions document or fails the test.
func parse(t *testing.T, doc string) *Extensions {
	t.Helper()
	ext, err := ParseExtensions("ext.json", []byte(doc))
	if err != nil {
		t.Fatalf("ParseExtensions: %v", err)
	}
	return ext
}

// withSibling wraps one entry named "bad" next to a valid stdio server "good".
func withSibling(entry string) string {
	return `{"mcpServers": {"bad": ` + entry + `, "good": {"command": "run-good"}}}`
}

// problemsFor returns the problems naming server.
func problemsFor(ext *Extensions, server string) []Problem {
	var out []Problem
	for _, p := range ext.Problems {
		if p.Server == server {
			out = append(out, p)
		}
	}
	return out
}

// hasProblem reports whether any problem has severity and a field starting
// with fieldPrefix and a message containing msg.
func hasProblem(ps []Problem, severity, fieldPrefix, msg string) bool {
	for _, p := range ps {
		if p.Severity == severity && strings.HasPrefix(p.Field, fieldPrefix) && strings.Contains(p.Message, msg) {
			return true
		}
	}
	return false
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func names(servers []*Server) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.Name)
	}
	return out
}
