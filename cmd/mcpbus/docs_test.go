package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// maxReadmeBytes keeps the README a front door: what mcpbus is, the two
// commands, the tour and links; reference material belongs in docs/.
const maxReadmeBytes = 20000

// internalHistory matches what user documentation must not say: issue
// numbers, the project's internal history, design files outside the repo.
var internalHistory = regexp.MustCompile(`\b[Ii]ssue [0-9]+|\bthe seed\b|shared/DESIGN|DESIGN §`)

// TestUserDocsAreShortAndSelfContained fails when the README outgrows a
// front door or when the README, SECURITY.md or a page of docs/ mentions internal
// history or a file outside the repository.
func TestUserDocsAreShortAndSelfContained(t *testing.T) {
	if fi, err := os.Stat("../../README.md"); err != nil {
		t.Fatal(err)
	} else if fi.Size() > maxReadmeBytes {
		t.Errorf("README.md is %d bytes, more than %d: move reference material to docs/", fi.Size(), maxReadmeBytes)
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md: %v (%d pages)", err, len(pages))
	}
	for _, p := range append(pages, "../../README.md", "../../SECURITY.md") {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range internalHistory.FindAllIndex(data, -1) {
			t.Errorf("%s mentions %q (internal history or a file outside the repository)", filepath.Base(p), data[m[0]:m[1]])
		}
	}
}
