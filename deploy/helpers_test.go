package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root (this module is deploy/).
const repoRoot = ".."

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// generateSecrets runs deploy/secrets/generate.sh into a fresh directory
// and returns it, with the files it wrote.
func generateSecrets(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secrets")
	out, err := exec.Command("bash", filepath.Join("secrets", "generate.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("secrets/generate.sh: %v\n%s", err, out)
	}
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("secrets/generate.sh wrote %s with mode %v, want no group or other access", e.Name(), info.Mode().Perm())
		}
		files[e.Name()] = readFile(t, filepath.Join(dir, e.Name()))
	}
	if out, err := exec.Command("bash", filepath.Join("secrets", "generate.sh"), dir).CombinedOutput(); err == nil {
		t.Errorf("secrets/generate.sh overwrote existing secrets: %s", out)
	}
	return dir, files
}

// envFile parses KEY=VALUE lines.
func envFile(t *testing.T, content string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(content, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || v == "" {
			t.Fatalf("env file line %q: want KEY=VALUE", line)
		}
		env[k] = v
	}
	return env
}

// copyTree copies the files under src (relative to this directory) to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testCerts runs deploy/secrets/certs.sh into a fresh directory and
// returns the directory of the certificates (ca.pem, nats.pem, ...).
func testCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("bash", filepath.Join("secrets", "certs.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("secrets/certs.sh: %v\n%s", err, out)
	}
	return filepath.Join(dir, "tls")
}

// withCerts points the certificate paths of dir/cluster.conf
// (/etc/nats/tls/, where the deployments mount certs.sh's files) at certs.
func withCerts(t *testing.T, dir, certs string) {
	t.Helper()
	if certs == "" { // a configuration without TLS, or whose paths the caller rewrote
		return
	}
	conf := readFile(t, filepath.Join(dir, "cluster.conf"))
	if !strings.Contains(conf, "/etc/nats/tls/") {
		t.Fatalf("%s/cluster.conf has no TLS certificate under /etc/nats/tls/", dir)
	}
	conf = strings.ReplaceAll(conf, "/etc/nats/tls/", certs+"/")
	if err := os.WriteFile(filepath.Join(dir, "cluster.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}
