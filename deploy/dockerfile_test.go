package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction: its keyword (upper case), its
// flags (--from=build) and its arguments (JSON form decoded, shell form
// split on blanks).
type instruction struct {
	Cmd   string
	Flags map[string]string
	Args  []string
	Raw   string
	Line  int
}

// stage is a FROM and the instructions up to the next one.
type stage struct {
	Base, Name string
	Body       []instruction
}

// parseDockerfile is a small Dockerfile parser: comments, line
// continuations, parser directives, JSON and shell forms. Heredocs are not
// supported (and not used).
func parseDockerfile(t *testing.T, text string) (directives map[string]string, stages []stage) {
	t.Helper()
	directives = map[string]string{}
	lines := strings.Split(text, "\n")
	inDirectives := true
	var cur strings.Builder
	start := 0
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if inDirectives {
			if m := regexp.MustCompile(`^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$`).FindStringSubmatch(trimmed); m != nil {
				directives[strings.ToLower(m[1])] = m[2]
				continue
			}
			inDirectives = false
		}
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		in := parseInstruction(t, cur.String(), start)
		cur.Reset()
		if in.Cmd == "FROM" {
			st := stage{Base: in.Args[0]}
			if len(in.Args) == 3 && strings.EqualFold(in.Args[1], "AS") {
				st.Name = in.Args[2]
			} else if len(in.Args) != 1 {
				t.Fatalf("Dockerfile:%d: FROM %v", in.Line, in.Args)
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.Cmd != "ARG" {
				t.Fatalf("Dockerfile:%d: %s before FROM", in.Line, in.Cmd)
			}
			continue
		}
		stages[len(stages)-1].Body = append(stages[len(stages)-1].Body, in)
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends inside a continued line")
	}
	return directives, stages
}

var knownInstructions = []string{"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
	"LABEL", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}

func parseInstruction(t *testing.T, s string, line int) instruction {
	t.Helper()
	kw, rest, _ := strings.Cut(s, " ")
	in := instruction{Cmd: strings.ToUpper(kw), Flags: map[string]string{}, Raw: s, Line: line}
	if !slices.Contains(knownInstructions, in.Cmd) {
		t.Fatalf("Dockerfile:%d: unknown instruction %q", line, kw)
	}
	rest = strings.TrimSpace(rest)
	for strings.HasPrefix(rest, "--") {
		flag, after, _ := strings.Cut(rest, " ")
		k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		if prev, ok := in.Flags[k]; ok {
			v = prev + "," + v
		}
		in.Flags[k] = v
		rest = strings.TrimSpace(after)
	}
	if strings.HasPrefix(rest, "[") {
		if err := json.Unmarshal([]byte(rest), &in.Args); err != nil {
			t.Fatalf("Dockerfile:%d: %s: bad JSON form: %v", line, in.Cmd, err)
		}
		return in
	}
	in.Args = strings.Fields(rest)
	return in
}

// makeBuildBinaries is the binaries `make build` writes, from the
// Makefile's build recipe: `-o $(BIN)/name pkg` names one, `-o $(BIN)/
// patterns` one per main package (named after its directory).
func makeBuildBinaries(t *testing.T) []string {
	t.Helper()
	mk := readFile(t, filepath.Join(repoRoot, "Makefile"))
	_, recipe, ok := strings.Cut(mk, "\nbuild:")
	if !ok {
		t.Fatal("Makefile has no build target")
	}
	var bins []string
	for _, line := range strings.Split(recipe, "\n")[1:] {
		if !strings.HasPrefix(line, "\t") {
			break
		}
		f := strings.Fields(line)
		i := slices.Index(f, "-o")
		if i < 0 || !slices.Contains(f, "build") {
			continue
		}
		out, pkgs := f[i+1], f[i+2:]
		if !strings.HasSuffix(out, "/") {
			bins = append(bins, path.Base(out))
			continue
		}
		cmd := exec.Command("go", append([]string{"list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`}, pkgs...)...)
		cmd.Dir = repoRoot
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v: %v", pkgs, err)
		}
		for _, p := range strings.Fields(string(b)) {
			bins = append(bins, path.Base(p))
		}
	}
	if !slices.Contains(bins, "mcpbus") || !slices.Contains(bins, "demo-server") {
		t.Fatalf("make build produces %v: want mcpbus (every service: mcpbus serve <service>) and demo-server", bins)
	}
	return bins
}

// TestDockerfile: a multi-stage build whose Go stage runs `make build` on
// the Go version of go.work, whose runtime stage copies every binary
// `make build` produces and runs as a non-root user, with COPY sources that
// exist in the build context.
func TestDockerfile(t *testing.T) {
	directives, stages := parseDockerfile(t, readFile(t, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a build and a runtime stage", len(stages))
	}
	build, runtime := stages[0], stages[len(stages)-1]

	// The builder: golang at go.work's Go version, running make build.
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, filepath.Join(repoRoot, "go.work")))
	if goVersion == nil {
		t.Fatal("go.work has no go line")
	}
	if !strings.HasPrefix(build.Base, "golang:"+goVersion[1]) || build.Name == "" {
		t.Errorf("build stage FROM %s AS %q, want golang:%s... AS <name>", build.Base, build.Name, goVersion[1])
	}
	outDir := ""
	for _, in := range build.Body {
		if len(in.Flags["mount"]) > 0 && directives["syntax"] == "" {
			t.Errorf("Dockerfile:%d: RUN --mount needs the # syntax=docker/dockerfile:1 directive", in.Line)
		}
		if in.Cmd == "RUN" && strings.Contains(in.Raw, "make build") {
			m := regexp.MustCompile(`make build BIN=(\S+)`).FindStringSubmatch(in.Raw)
			outDir = "bin"
			if m != nil {
				outDir = m[1]
			}
		}
	}
	if outDir == "" {
		t.Fatal("the build stage does not run make build")
	}

	// The runtime: every binary, from the build stage, into one directory.
	copied := map[string]bool{}
	for _, in := range runtime.Body {
		if in.Cmd != "COPY" || in.Flags["from"] != build.Name {
			continue
		}
		for _, src := range in.Args[:len(in.Args)-1] {
			if path.Dir(src) != strings.TrimSuffix(path.Clean(path.Join("/src", outDir)), "/") && path.Dir(src) != path.Clean(outDir) {
				t.Errorf("Dockerfile:%d: COPY --from=%s %s: not from make build's output %s", in.Line, build.Name, src, outDir)
			}
			copied[path.Base(src)] = true
		}
		if dst := in.Args[len(in.Args)-1]; dst != "/usr/local/bin/" {
			t.Errorf("Dockerfile:%d: binaries copied to %s, want /usr/local/bin/ (on PATH)", in.Line, dst)
		}
	}
	for _, bin := range makeBuildBinaries(t) {
		if !copied[bin] {
			t.Errorf("the runtime stage does not copy %s, which make build produces", bin)
		}
	}

	// A non-root user the stage creates.
	user := ""
	for _, in := range runtime.Body {
		if in.Cmd == "USER" {
			user = in.Args[0]
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "root" || uid == "0" {
		t.Errorf("runtime stage USER %q, want a non-root user", user)
	}
	created := false
	for _, in := range runtime.Body {
		if in.Cmd == "RUN" && regexp.MustCompile(`useradd .*--uid `+regexp.QuoteMeta(uid)+`\b`).MatchString(in.Raw) {
			created = true
		}
	}
	if !created {
		t.Errorf("runtime stage USER %s is not created by a RUN useradd --uid %s", user, uid)
	}
	var entrypoint []string
	for _, in := range runtime.Body {
		if in.Cmd == "ENTRYPOINT" {
			entrypoint = in.Args
		}
	}
	if !slices.Equal(entrypoint, []string{"mcpbus"}) {
		t.Errorf("ENTRYPOINT %v, want [mcpbus] (compose and k8s pass `serve <service>`)", entrypoint)
	}

	// COPY and ADD sources from the context exist in the repository.
	for _, st := range stages {
		for _, in := range st.Body {
			if (in.Cmd != "COPY" && in.Cmd != "ADD") || in.Flags["from"] != "" {
				continue
			}
			for _, src := range in.Args[:len(in.Args)-1] {
				if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(src))); err != nil {
					t.Errorf("Dockerfile:%d: COPY source %s: %v", in.Line, src, err)
				}
			}
		}
	}
}

// TestDockerignoreKeepsTheBuildInputs: the build context's ignore file
// (Dockerfile.dockerignore, read by BuildKit beside the Dockerfile) leaves
// the workspace, every module, the Makefile and the sources in, and keeps
// generated secrets and local state out.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	var patterns []string
	for _, line := range strings.Split(readFile(t, "Dockerfile.dockerignore"), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	ignored := func(p string) bool {
		for _, pat := range patterns {
			for prefix := p; prefix != "."; prefix = path.Dir(prefix) {
				if ok, _ := path.Match(pat, prefix); ok {
					return true
				}
			}
			if strings.HasPrefix(pat, "**/") {
				if ok, _ := path.Match(strings.TrimPrefix(pat, "**/"), path.Base(p)); ok {
					return true
				}
			}
		}
		return false
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	need := []string{"go.work", "go.work.sum", "Makefile", "cmd/mcpbus/main.go", "examples/demoserver"}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		need = append(need, path.Join(filepath.ToSlash(rel), "go.mod"))
	}
	for _, p := range need {
		if ignored(p) {
			t.Errorf("Dockerfile.dockerignore leaves %s out of the build context", p)
		}
	}
	for _, p := range []string{"deploy/secrets/api.env", "deploy/secrets/tls/ca.key", ".git/config", ".mcpbus/nats.token", "bin/mcpbus"} {
		if !ignored(p) {
			t.Errorf("Dockerfile.dockerignore lets %s into the build context", p)
		}
	}
}
