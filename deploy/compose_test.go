package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
)

// mcpbusServices are the compose services that run `mcpbus serve`, with
// their replicas.
var mcpbusServices = map[string]int{"api": 1, "discovery": 1, "toolcall": 2, "taskpoller": 2, "tokens": 1}

var natsNodes = []string{"nats-1", "nats-2", "nats-3"}

// serviceNeeds are the secrets besides its NATS password each service
// needs: the database (every service; discovery keeps the tool pins there)
// and the credentials key (tokens and api).
var serviceNeeds = map[string][]string{
	"api":        {"MCPBUS_DATABASE_URL", "MCPBUS_CREDENTIALS_KEY"},
	"tokens":     {"MCPBUS_DATABASE_URL", "MCPBUS_CREDENTIALS_KEY"},
	"toolcall":   {"MCPBUS_DATABASE_URL"},
	"taskpoller": {"MCPBUS_DATABASE_URL"},
	"discovery":  {"MCPBUS_DATABASE_URL"},
}

// loadCompose loads deploy/compose.yaml, copied with the files it mounts
// into a temporary directory whose secrets/ generate.sh wrote, with
// compose-go's validation on. resolveEnv merges the env files into each
// service's environment; without it the environment is what compose.yaml
// itself writes.
func loadCompose(t *testing.T, resolveEnv bool) (*types.Project, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"config", "nats"} {
		copyTree(t, sub, filepath.Join(dir, sub))
	}
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(readFile(t, "compose.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	secretsDir, secrets := generateSecrets(t)
	if err := os.Rename(secretsDir, filepath.Join(dir, "secrets")); err != nil {
		t.Fatal(err)
	}
	opts := []func(*loader.Options){func(o *loader.Options) { o.SkipResolveEnvironment = !resolveEnv }}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
		Environment: types.Mapping{}, // nothing from the test's own environment
	}, opts...)
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p, secrets
}

// TestComposeServices: the NATS cluster, PostgreSQL and every service,
// started in dependency order behind health checks, each service with its
// health listener and the image's subcommands.
func TestComposeServices(t *testing.T) {
	p, _ := loadCompose(t, true)
	want := []string{"api", "demo", "discovery", "migrate", "nats-1", "nats-2", "nats-3", "postgres", "taskpoller", "tokens", "toolcall"}
	if got := p.ServiceNames(); !slices.Equal(sorted(got), want) {
		t.Errorf("services %v, want %v", sorted(got), want)
	}

	for _, name := range natsNodes {
		s := p.Services[name]
		if !slices.Equal(s.Command, []string{"-c", "/etc/nats/cluster.conf"}) {
			t.Errorf("%s: command %v, want the shipped cluster.conf", name, s.Command)
		}
		if v := s.Environment["NATS_SERVER_NAME"]; v == nil || *v != name {
			t.Errorf("%s: NATS_SERVER_NAME %v, want its own name (the routes of cluster.conf)", name, v)
		}
		if !mounts(s, "/etc/nats", filepath.Join(p.WorkingDir, "nats")) {
			t.Errorf("%s: deploy/nats is not mounted at /etc/nats (cluster.conf includes accounts.conf from there)", name)
		}
		checkHealth(t, s)
	}
	checkHealth(t, p.Services["postgres"])

	for name, replicas := range mcpbusServices {
		s, ok := p.Services[name]
		if !ok {
			continue
		}
		if s.Image != "mcpbus:latest" {
			t.Errorf("%s: image %s, want mcpbus:latest (docker build -t mcpbus:latest)", name, s.Image)
		}
		if len(s.Command) < 2 || s.Command[0] != "serve" || s.Command[1] != name {
			t.Errorf("%s: command %v, want serve %s", name, s.Command, name)
		}
		if got := s.GetScale(); got != replicas {
			t.Errorf("%s: %d replica(s), want %d", name, got, replicas)
		}
		port := "127.0.0.1:8001"
		if name == "api" {
			port = "localhost:8001" // HTTPS: the name in the api's certificate
		} else {
			if i := slices.Index(s.Command, "--health-listen"); i < 0 || i+1 >= len(s.Command) || s.Command[i+1] != "0.0.0.0:8081" {
				t.Errorf("%s: command %v has no --health-listen 0.0.0.0:8081", name, s.Command)
			}
			port = "127.0.0.1:8081"
		}
		checkHealth(t, s)
		if test := strings.Join(s.HealthCheck.Test, " "); !strings.Contains(test, port+"/readyz") {
			t.Errorf("%s: health check %q does not ask /readyz on its port %s", name, test, port)
		}
		for _, dep := range append(natsNodes, "postgres") {
			if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: depends on %s %+v, want service_healthy", name, dep, d)
			}
		}
		if d := s.DependsOn["migrate"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: does not wait for migrate to complete: %+v", name, d)
		}
		// Each service gets exactly what it needs (docs/deployment.md).
		needs := serviceNeeds[name]
		for _, v := range []string{"MCPBUS_NATS_URL", config.NATSServicePasswordVar(name), "MCPBUS_DATABASE_URL", "MCPBUS_CREDENTIALS_KEY"} {
			want := v == "MCPBUS_NATS_URL" || v == config.NATSServicePasswordVar(name) || slices.Contains(needs, v)
			if got := s.Environment[v] != nil; got != want {
				t.Errorf("%s: has %s: %v, want %v", name, v, got, want)
			}
		}
		for other := range mcpbusServices {
			if other != name && s.Environment[config.NATSServicePasswordVar(other)] != nil {
				t.Errorf("%s: gets %s's NATS password", name, other)
			}
		}
		if !mounts(s, "/etc/mcpbus", filepath.Join(p.WorkingDir, "config")) {
			t.Errorf("%s: deploy/config is not mounted at /etc/mcpbus", name)
		}
	}
	for _, dep := range []string{"tokens", "discovery", "toolcall", "taskpoller"} {
		if d := p.Services["api"].DependsOn[dep]; d.Condition != types.ServiceConditionHealthy {
			t.Errorf("api: starts before %s is healthy", dep)
		}
	}
	if m := p.Services["migrate"]; !slices.Equal(m.Command, []string{"migrate"}) || m.Restart != "no" {
		t.Errorf("migrate: command %v restart %q, want a one-shot mcpbus migrate", m.Command, m.Restart)
	}
	if d := p.Services["demo"]; !slices.Equal(d.Entrypoint, []string{"demo-server"}) {
		t.Errorf("demo: entrypoint %v, want demo-server (a binary of the image)", d.Entrypoint)
	}
	if ports := p.Services["api"].Ports; len(ports) != 1 || ports[0].Target != 8001 {
		t.Errorf("api: ports %+v, want 8001 published", ports)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func mounts(s types.ServiceConfig, target, source string) bool {
	for _, v := range s.Volumes {
		if v.Target == target && v.Source == source {
			return true
		}
	}
	return false
}

func checkHealth(t *testing.T, s types.ServiceConfig) {
	t.Helper()
	if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Test[0] != "CMD" {
		t.Errorf("%s: health check %+v, want an exec (CMD) check", s.Name, s.HealthCheck)
	}
}

// secretName is an environment variable that holds a secret.
var secretName = regexp.MustCompile(`(?i)(KEY|PASSWORD|SECRET|TOKEN|_URL)$`)

// TestComposeHasNoInlineSecret: no secret value is written in compose.yaml:
// every secret-looking variable it sets itself is a *_FILE path, the
// credentials key and NATS and database credentials come from the env
// files, PostgreSQL's password is a compose secret, and none of the
// generated values appears in the file.
func TestComposeHasNoInlineSecret(t *testing.T) {
	p, secrets := loadCompose(t, false)
	for _, s := range p.Services {
		for k, v := range s.Environment {
			if secretName.MatchString(k) {
				t.Errorf("%s: compose.yaml sets %s itself; secrets come from the env files", s.Name, k)
			}
			if v != nil && regexp.MustCompile(`://[^/@\s]+:[^/@\s]+@`).MatchString(*v) {
				t.Errorf("%s: %s holds a URL with a password", s.Name, k)
			}
		}
	}
	for name := range mcpbusServices {
		if files := p.Services[name].EnvFiles; len(files) != 2 || filepath.Base(files[0].Path) != "common.env" || filepath.Base(files[1].Path) != name+".env" || !files[0].Required || !files[1].Required {
			t.Errorf("%s: env_file %+v, want the required secrets/common.env and secrets/%s.env", name, files, name)
		}
	}
	if files := p.Services["migrate"].EnvFiles; len(files) != 1 || filepath.Base(files[0].Path) != "migrate.env" {
		t.Errorf("migrate: env_file %+v, want secrets/migrate.env only", files)
	}
	for _, name := range natsNodes {
		if files := p.Services[name].EnvFiles; len(files) != 1 || filepath.Base(files[0].Path) != "nats.env" || !files[0].Required {
			t.Errorf("%s: env_file %+v, want the required secrets/nats.env", name, files)
		}
	}
	pg := p.Services["postgres"]
	if v := pg.Environment["POSTGRES_PASSWORD_FILE"]; v == nil || *v != "/run/secrets/postgres_password" || len(pg.Secrets) != 1 || pg.Secrets[0].Source != "postgres_password" {
		t.Errorf("postgres: password from %v, secrets %+v; want the compose secret postgres_password", v, pg.Secrets)
	}
	if sec, ok := p.Secrets["postgres_password"]; !ok || filepath.Base(sec.File) != "postgres_password" {
		t.Errorf("secret postgres_password: %+v, want the file secrets/postgres_password", sec)
	}

	compose := readFile(t, "compose.yaml")
	for file, content := range secrets {
		values := []string{strings.TrimSpace(content)}
		if strings.HasSuffix(file, ".env") {
			values = values[:0]
			for _, v := range envFile(t, content) {
				values = append(values, v)
			}
		}
		for _, v := range values {
			if strings.Contains(compose, v) {
				t.Errorf("compose.yaml contains a value of secrets/%s", file)
			}
		}
	}

	// The env files give the services what they need.
	common := envFile(t, secrets["common.env"])
	natsEnv := envFile(t, secrets["nats.env"])
	for _, node := range natsNodes {
		if !strings.Contains(common["MCPBUS_NATS_URL"], "tls://"+node+":4222") || strings.Contains(common["MCPBUS_NATS_URL"], "@") {
			t.Errorf("MCPBUS_NATS_URL %q does not reach %s over TLS without credentials", common["MCPBUS_NATS_URL"], node)
		}
	}
	if sum := sha256.Sum256([]byte(strings.TrimSpace(secrets["admin-api-key"]))); common["MCPBUS_ADMIN_KEY_SHA256"] != hex.EncodeToString(sum[:]) {
		t.Error("MCPBUS_ADMIN_KEY_SHA256 is not the SHA-256 of admin-api-key")
	}
	for name := range mcpbusServices {
		env := envFile(t, secrets[name+".env"])
		if v := config.NATSServicePasswordVar(name); env[v] == "" || env[v] != natsEnv[v] {
			t.Errorf("%s.env: %s is not the password nats.env gives its NATS user", name, v)
		}
		if key, ok := env["MCPBUS_CREDENTIALS_KEY"]; ok {
			if _, err := crypto.ParseKey(key); err != nil {
				t.Errorf("generate.sh's MCPBUS_CREDENTIALS_KEY: %v", err)
			}
		}
		if db, ok := env["MCPBUS_DATABASE_URL"]; ok && (!strings.Contains(db, ":"+strings.TrimSpace(secrets["postgres_password"])+"@postgres:5432/mcpbus") || !strings.Contains(db, "sslmode=verify-full")) {
			t.Errorf("%s.env: MCPBUS_DATABASE_URL does not carry the postgres_password secret or does not verify the server (sslmode=verify-full)", name)
		}
	}
}
