package deploy_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// loadSettings loads a shipped config.yaml with the environment the
// deployment gives it.
func loadSettings(t *testing.T, path string) *config.Settings {
	t.Helper()
	t.Setenv("MCPBUS_DATABASE_URL", "postgres://mcpbus@postgres:5432/mcpbus")
	t.Setenv("MCPBUS_ADMIN_KEY_SHA256", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
	s, err := config.LoadSettings(path, true, config.ReadEnv())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// TestShippedConfig: deploy/config is valid as `mcpbus config validate`
// sees it, asks for the three NATS replicas the clusters have, binds agent
// workers to their users (accounts.conf's per-user users need it), takes
// the admin key's hash from the environment, and listens where compose and
// the Kubernetes Service expect; the Kubernetes ConfigMap carries the same
// config.yaml and a valid extensions_config.json.
func TestShippedConfig(t *testing.T) {
	dir := "config"
	settingsPath, extPath := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "extensions_config.json")
	s := loadSettings(t, settingsPath)
	if problems := config.ValidateFiles(extPath, true, settingsPath, true, config.ReadEnv()); config.HasErrors(problems) {
		t.Errorf("deploy/config: %v", problems)
	}
	if int(s.NATS.Replicas) != len(natsNodes) {
		t.Errorf("nats.replicas %d, want %d (the cluster's nodes)", s.NATS.Replicas, len(natsNodes))
	}
	if !s.NATS.BindIdentity {
		t.Error("nats.bind_identity is off: accounts.conf's per-user agent workers would reach no service")
	}
	if s.Database.Backend != config.BackendPostgres {
		t.Errorf("database.backend %s, want postgres", s.Database.Backend)
	}
	if len(s.API.Keys) != 1 || s.API.Keys[0].SHA256 != os.Getenv("MCPBUS_ADMIN_KEY_SHA256") || s.API.Keys[0].Role != "admin" {
		t.Errorf("api.keys %+v, want the admin key from $MCPBUS_ADMIN_KEY_SHA256", s.API.Keys)
	}
	if s.API.Listen != "0.0.0.0:8001" {
		t.Errorf("api.listen %s, want 0.0.0.0:8001 (compose's port and the k8s Service)", s.API.Listen)
	}
	raw := readFile(t, settingsPath)
	if regexp.MustCompile(`://[^/@\s]+:[^/@\s]+@|(?i)password:`).MatchString(raw) {
		t.Error("deploy/config/config.yaml holds a credential")
	}
	ext, err := config.LoadExtensions(extPath, true, config.ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range ext.Enabled() {
		if srv.Type == config.TransportStdio && !strings.HasPrefix(srv.Command, "/usr/local/bin/") {
			t.Errorf("extensions_config.json: %s runs %s, not a binary of the image", srv.Name, srv.Command)
		}
	}

	m := loadManifests(t)
	cm := m.configMaps["mcpbus-config"]
	if cm == nil {
		t.Fatal("no ConfigMap mcpbus-config")
	}
	if !sameYAML(t, cm.Data["config.yaml"], raw) {
		t.Errorf("the ConfigMap mcpbus-config's config.yaml differs from deploy/config/config.yaml:\n%s", cm.Data["config.yaml"])
	}
	kdir := t.TempDir()
	for name, content := range cm.Data {
		if err := os.WriteFile(filepath.Join(kdir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if problems := config.ValidateFiles(filepath.Join(kdir, "extensions_config.json"), true, filepath.Join(kdir, "config.yaml"), true, config.ReadEnv()); config.HasErrors(problems) {
		t.Errorf("the ConfigMap mcpbus-config: %v", problems)
	}
	// The services other than the api start without the admin key's hash.
	t.Setenv("MCPBUS_ADMIN_KEY_SHA256", "")
	if problems := config.ValidateFiles(filepath.Join(kdir, "extensions_config.json"), true, filepath.Join(kdir, "services.yaml"), true, config.ReadEnv()); config.HasErrors(problems) {
		t.Errorf("the ConfigMap mcpbus-config's services.yaml: %v", problems)
	}
	if s, err := config.LoadSettings(filepath.Join(kdir, "services.yaml"), true, config.ReadEnv()); err != nil || len(s.API.Keys) != 0 {
		t.Errorf("services.yaml: api.keys %v (%v), want none: only the api reads them", s, err)
	}
}

// sameYAML reports whether two config.yaml documents hold the same data
// but for the keys the Helm chart sets itself (nats.tls, api.tls,
// database.auto_migrate: where its Secrets are mounted, whether its Job
// migrates).
func sameYAML(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y map[string]any
	if err := yaml.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]any{x, y} {
		for section, key := range map[string]string{"nats": "tls", "api": "tls", "database": "auto_migrate"} {
			if s, ok := m[section].(map[string]any); ok {
				delete(s, key)
			}
		}
	}
	return reflect.DeepEqual(x, y)
}
