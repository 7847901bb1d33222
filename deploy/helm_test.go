package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// chartDir is the Helm chart; the release the tests render is "mcpbus" in
// the namespace "mcpbus", as deploy/k8s is.
var chartDir = filepath.Join("helm", "mcpbus")

// helmPin is the helm version .ci/run installs (HELM_VERSION there).
func helmPin(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^HELM_VERSION=(v[0-9.]+)$`).FindStringSubmatch(readFile(t, filepath.Join(repoRoot, ".ci", "run")))
	if m == nil {
		t.Fatal(".ci/run pins no HELM_VERSION")
	}
	return m[1]
}

// helmBin is the helm binary: $HELM, else helm on PATH, else
// $(go env GOPATH)/bin/helm, and it must be the version .ci/run pins.
// Missing or another version, the test fails saying how to install it:
// the chart is never left untested.
func helmBin(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() { helmPath, helmErr = findHelm(t) })
	if helmErr != "" {
		t.Fatal(helmErr)
	}
	return helmPath
}

var (
	helmOnce          sync.Once
	helmPath, helmErr string
)

func findHelm(t *testing.T) (string, string) {
	t.Helper()
	pin := helmPin(t)
	install := fmt.Sprintf("install the pinned helm: GOWORK=off go install helm.sh/helm/v3/cmd/helm@%s (.ci/run does), or set HELM to its path", pin)
	h := os.Getenv("HELM")
	if h == "" {
		h, _ = exec.LookPath("helm")
	}
	if h == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			h = filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		}
	}
	if _, err := os.Stat(h); h == "" || err != nil {
		return "", fmt.Sprintf("helm not found: %s", install)
	}
	// The module version the binary was built from (a helm built with go
	// install reports no release version of its own).
	out, err := exec.Command("go", "version", "-m", h).Output()
	if err != nil {
		return "", fmt.Sprintf("go version -m %s: %v: %s", h, err, install)
	}
	v := regexp.MustCompile(`(?m)^\s+mod\s+helm\.sh/helm/v3\s+(\S+)`).FindSubmatch(out)
	if v == nil || string(v[1]) != pin {
		return "", fmt.Sprintf("helm at %s is not helm.sh/helm/v3 %s (built from %q): %s", h, pin, v, install)
	}
	return h, ""
}

// renderChart runs helm template on the chart with args and returns its
// output, or the error with helm's message.
func renderChart(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", "mcpbus", chartDir, "--namespace", "mcpbus"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template %v: %w: %s", args, err, stderr.String())
	}
	return string(out), nil
}

func mustRender(t *testing.T, args ...string) *manifests {
	t.Helper()
	out, err := renderChart(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return parseManifests(t, fmt.Sprintf("helm template %v", args), out)
}

// chartAppVersion is Chart.yaml's appVersion.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "Chart.yaml"))), &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml: appVersion %q: %v", chart.AppVersion, err)
	}
	return chart.AppVersion
}

// productionArgs render values-production.yaml pinned to a digest.
var productionDigest = "sha256:" + strings.Repeat("ab", 32)
var productionArgs = []string{"-f", filepath.Join(chartDir, "values-production.yaml"), "--set", "image.digest=" + productionDigest}

// TestHelmGeneratesK8s: deploy/k8s is what generate-k8s.sh (make k8s)
// writes from the chart today, and nothing else; the chart's copies of
// accounts.conf and config.yaml are deploy/nats's and deploy/config's; the
// image tag it defaults to is the version the services report.
func TestHelmGeneratesK8s(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("helm", "generate-k8s.sh"), dir)
	cmd.Env = append(os.Environ(), "HELM="+helmBin(t))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate-k8s.sh: %v\n%s", err, out)
	}
	generated, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	committed, _ := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	var gnames, cnames []string
	for _, f := range generated {
		gnames = append(gnames, filepath.Base(f))
	}
	for _, f := range committed {
		cnames = append(cnames, filepath.Base(f))
	}
	if !slices.Equal(gnames, cnames) {
		t.Errorf("deploy/k8s holds %v, the chart generates %v: run make k8s", cnames, gnames)
	}
	for _, name := range gnames {
		if got, want := readFile(t, filepath.Join("k8s", name)), readFile(t, filepath.Join(dir, name)); got != want {
			t.Errorf("deploy/k8s/%s differs from the chart's output: run make k8s", name)
		}
	}
	if readFile(t, filepath.Join(chartDir, "files", "accounts.conf")) != readFile(t, filepath.Join("nats", "accounts.conf")) {
		t.Error("helm/mcpbus/files/accounts.conf differs from deploy/nats/accounts.conf: copy it over")
	}
	if readFile(t, filepath.Join(chartDir, "files", "config.yaml")) != readFile(t, filepath.Join("config", "config.yaml")) {
		t.Error("helm/mcpbus/files/config.yaml differs from deploy/config/config.yaml: copy it over")
	}
	if v := chartAppVersion(t); v != microsvc.Version {
		t.Errorf("Chart.yaml appVersion %s, but the services report version %s", v, microsvc.Version)
	}
}

// TestHelmProductionValues: values-production.yaml renders objects that
// decode strictly and pass the same checks as deploy/k8s (deployments,
// identities, references, network policies), with the image pinned by tag
// and digest, TLS on NATS and the api from cert-manager Certificates whose
// names cover the Services and every NATS pod, and the services trusting
// the CA.
func TestHelmProductionValues(t *testing.T) {
	m := mustRender(t, productionArgs...)
	m.secrets = loadManifests(t).secrets // the operator's, as secrets.example.yaml lists them
	checkDeployments(t, m, "registry.example.com/mcpbus:"+chartAppVersion(t)+"@"+productionDigest)
	checkReferences(t, m)
	checkNetworkPolicy(t, m)
	checkPlacement(t, m)

	certs := map[string]*certificate{}
	for _, c := range m.certificates {
		certs[c.Name] = c
	}
	nats, api := certs["mcpbus-nats"], certs["mcpbus-api"]
	if nats == nil || api == nil {
		t.Fatalf("Certificates %v, want mcpbus-nats and mcpbus-api", certs)
	}
	for i := range 3 {
		host := fmt.Sprintf("mcpbus-nats-%d.mcpbus-nats-headless", i)
		if !slices.ContainsFunc(nats.Spec.DNSNames, func(n string) bool { return n == host || wildcardMatch(n, host) }) {
			t.Errorf("the NATS certificate %v does not cover the route host %s", nats.Spec.DNSNames, host)
		}
	}
	if !slices.Contains(nats.Spec.DNSNames, "mcpbus-nats") || !slices.Contains(api.Spec.DNSNames, "mcpbus.example.com") {
		t.Errorf("certificates: NATS %v, api %v", nats.Spec.DNSNames, api.Spec.DNSNames)
	}
	cm := m.configMaps["mcpbus-nats-config"]
	conf := cm.Data["cluster.conf"]
	for _, want := range []string{"https: 0.0.0.0:8222", "tls {", "verify: true"} {
		if !strings.Contains(conf, want) {
			t.Errorf("NATS cluster.conf with TLS lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "http: 0.0.0.0:8222") {
		t.Error("NATS monitoring stays plain HTTP with TLS on")
	}
	for svc := range mcpbusServices {
		c := m.deployments["mcpbus-"+svc].Spec.Template.Spec.Containers[0]
		for _, e := range c.Env {
			if e.Name == "MCPBUS_NATS_URL" && !strings.HasPrefix(e.Value, "tls://") {
				t.Errorf("mcpbus-%s: NATS URL %s, want tls://", svc, e.Value)
			}
		}
		if !mountsAt(c, "/etc/mcpbus-tls/nats") {
			t.Errorf("mcpbus-%s: the NATS CA is not mounted", svc)
		}
		if mountsAt(c, "/etc/mcpbus-tls/api") != (svc == "api") {
			t.Errorf("mcpbus-%s: the api's key mounted: %v, want only on the api", svc, mountsAt(c, "/etc/mcpbus-tls/api"))
		}
	}
	var apiCfg, svcCfg struct {
		NATS struct {
			TLS map[string]string `json:"tls"`
		} `json:"nats"`
		API struct {
			TLS map[string]string `json:"tls"`
		} `json:"api"`
	}
	cfg := m.configMaps["mcpbus-config"]
	if err := yaml.Unmarshal([]byte(cfg.Data["config.yaml"]), &apiCfg); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(cfg.Data["services.yaml"]), &svcCfg); err != nil {
		t.Fatal(err)
	}
	if apiCfg.API.TLS["cert_file"] == "" || apiCfg.NATS.TLS["ca_file"] == "" || svcCfg.NATS.TLS["ca_file"] == "" || svcCfg.API.TLS != nil {
		t.Errorf("TLS settings: api %+v, services %+v", apiCfg, svcCfg)
	}
}

func wildcardMatch(pattern, host string) bool {
	rest, ok := strings.CutPrefix(pattern, "*.")
	_, after, found := strings.Cut(host, ".")
	return ok && found && after == rest
}

// checkPlacement: every workload's pods repel each other across nodes
// (NATS required, so a lost node cannot take two of the three JetStream
// peers), spread over zones and nodes, and have a PodDisruptionBudget;
// NATS enters lame-duck mode on termination within its grace period.
func checkPlacement(t *testing.T, m *manifests) {
	t.Helper()
	for name, tmpl := range m.workloads() {
		pod := tmpl.Spec
		anti := pod.Affinity
		if anti == nil || anti.PodAntiAffinity == nil {
			t.Errorf("%s: no pod anti-affinity", name)
			continue
		}
		var terms []corev1.PodAffinityTerm
		terms = append(terms, anti.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		if name == "mcpbus-nats" && len(terms) == 0 {
			t.Errorf("%s: anti-affinity is only preferred: two JetStream peers may share a node", name)
		}
		for _, w := range anti.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
		if !slices.ContainsFunc(terms, func(term corev1.PodAffinityTerm) bool {
			return term.TopologyKey == "kubernetes.io/hostname" && term.LabelSelector != nil && selects(term.LabelSelector, tmpl.Labels)
		}) {
			t.Errorf("%s: no anti-affinity term on kubernetes.io/hostname that selects its own pods", name)
		}
		keys := map[string]bool{}
		for _, c := range pod.TopologySpreadConstraints {
			if c.LabelSelector == nil || !selects(c.LabelSelector, tmpl.Labels) || len(c.LabelSelector.MatchLabels) == 0 {
				t.Errorf("%s: topology spread on %s does not select its own pods", name, c.TopologyKey)
			}
			keys[c.TopologyKey] = true
		}
		if !keys["topology.kubernetes.io/zone"] || !keys["kubernetes.io/hostname"] {
			t.Errorf("%s: topology spread over %v, want zones and nodes", name, keys)
		}
	}
	sts := m.statefulSets["mcpbus-nats"]
	if sts == nil {
		t.Fatal("no StatefulSet mcpbus-nats")
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		!slices.Equal(c.Lifecycle.PreStop.Exec.Command[:3], []string{"nats-server", "--signal", "ldm=/tmp/nats.pid"}) {
		t.Errorf("NATS preStop %+v, want nats-server --signal ldm=/tmp/nats.pid (lame-duck mode)", c.Lifecycle)
	}
	conf := m.configMaps["mcpbus-nats-config"].Data["cluster.conf"]
	ldm := regexp.MustCompile(`(?m)^\s*lame_duck_duration:\s*(\S+)`).FindStringSubmatch(conf)
	pid := regexp.MustCompile(`(?m)^\s*pid_file:\s*(\S+)`).FindStringSubmatch(conf)
	if ldm == nil || pid == nil || pid[1] != "/tmp/nats.pid" || !mountsAt(c, "/tmp") {
		t.Fatalf("cluster.conf: lame_duck_duration %v, pid_file %v (the preStop signals /tmp/nats.pid on a writable /tmp)", ldm, pid)
	}
	d, err := time.ParseDuration(ldm[1])
	grace := sts.Spec.Template.Spec.TerminationGracePeriodSeconds
	if err != nil || grace == nil || time.Duration(*grace)*time.Second <= d {
		t.Errorf("NATS: lame_duck_duration %s (%v) does not fit in terminationGracePeriodSeconds %v", ldm[1], err, grace)
	}
}

// TestHelmPlacement checks the default render's placement (checkPlacement).
func TestHelmPlacement(t *testing.T) {
	checkPlacement(t, mustRender(t))
}

// TestHelmAutoscaling: by default toolcall and taskpoller scale through
// KEDA ScaledObjects on Prometheus queries over metrics the services
// export (toolcall: calls in flight per replica, AverageValue; taskpoller:
// the poll lag percentile, Value), and neither Deployment carries
// replicas; mode cpu makes HPAs instead, mode none fixed replicas; an
// unknown mode fails the render naming the value.
func TestHelmAutoscaling(t *testing.T) {
	// The metric names every service registers.
	reg := prometheus.NewRegistry()
	metrics.NewToolcall(reg)
	metrics.NewTaskpoller(reg)
	exported := map[string]string{}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		exported[f.GetName()] = f.GetType().String()
	}
	m := mustRender(t)
	want := map[string]struct {
		metric     string
		metricType string
	}{
		"mcpbus-toolcall":   {"mcpbus_toolcall_calls_in_flight", "AverageValue"},
		"mcpbus-taskpoller": {"mcpbus_taskpoller_poll_lag_seconds_bucket", "Value"},
	}
	if len(m.scaledObjects) != len(want) || len(m.hpas) != 0 {
		t.Fatalf("default render: %d ScaledObjects and %d HPAs, want one ScaledObject each for %v", len(m.scaledObjects), len(m.hpas), want)
	}
	metricName := regexp.MustCompile(`\b(mcpbus_[a-z_]+)\{`)
	for _, so := range m.scaledObjects {
		w, ok := want[so.Spec.ScaleTargetRef.Name]
		if !ok {
			t.Errorf("ScaledObject %s scales %s", so.Name, so.Spec.ScaleTargetRef.Name)
			continue
		}
		if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 2 || so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount <= *so.Spec.MinReplicaCount {
			t.Errorf("%s: replicas %v..%v, want at least 2 and room to grow", so.Name, so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "prometheus" {
			t.Fatalf("%s: triggers %+v, want one prometheus trigger", so.Name, so.Spec.Triggers)
		}
		tr := so.Spec.Triggers[0]
		if string(tr.MetricType) != w.metricType {
			t.Errorf("%s: metricType %s, want %s", so.Name, tr.MetricType, w.metricType)
		}
		for k := range tr.Metadata {
			if !slices.Contains(prometheusTriggerKeys, k) {
				t.Errorf("%s: trigger metadata %q is not a prometheus scaler parameter", so.Name, k)
			}
		}
		q := tr.Metadata["query"]
		names := metricName.FindAllStringSubmatch(q, -1)
		if len(names) == 0 || names[0][1] != w.metric {
			t.Errorf("%s: query %q, want one over %s", so.Name, q, w.metric)
		}
		for _, n := range names {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n[1], "_sum"), "_bucket"), "_count")
			if _, ok := exported[base]; !ok {
				t.Errorf("%s: query reads %s, which no service exports", so.Name, n[1])
			}
		}
		if !strings.Contains(q, `namespace="mcpbus"`) {
			t.Errorf("%s: query %q is not limited to the release's namespace", so.Name, q)
		}
		if th := tr.Metadata["threshold"]; th == "" || th == "0" {
			t.Errorf("%s: threshold %q", so.Name, th)
		}
	}

	cpu := mustRender(t, "--set", "autoscaling.mode=cpu")
	if len(cpu.hpas) != 2 || len(cpu.scaledObjects) != 0 {
		t.Errorf("mode cpu: %d HPAs, %d ScaledObjects", len(cpu.hpas), len(cpu.scaledObjects))
	}
	cpu.secrets = loadManifests(t).secrets // the operator's, as secrets.example.yaml lists them
	checkDeployments(t, cpu, "mcpbus:"+chartAppVersion(t))
	checkReferences(t, cpu)
	none := mustRender(t, "--set", "autoscaling.mode=none", "--set", "services.toolcall.replicas=4")
	if len(none.hpas)+len(none.scaledObjects) != 0 {
		t.Errorf("mode none: %d autoscalers", len(none.hpas)+len(none.scaledObjects))
	}
	if r := none.deployments["mcpbus-toolcall"].Spec.Replicas; r == nil || *r != 4 {
		t.Errorf("mode none: toolcall replicas %v, want services.toolcall.replicas 4", r)
	}
	if _, err := renderChart(t, "--set", "autoscaling.mode=cpus"); err == nil || !strings.Contains(err.Error(), `autoscaling.mode "cpus"`) {
		t.Errorf("an unknown autoscaling mode: %v, want an error naming it", err)
	}
}

// TestHelmImage: the image defaults to the chart's appVersion; "latest", an
// empty tag and a malformed digest are refused with the field named.
func TestHelmImage(t *testing.T) {
	for _, bad := range [][]string{
		{"--set", "image.tag=latest"},
		{"--set", "image.digest=sha256:1234"},
		{"--set", "nats.image.tag=latest"},
	} {
		if _, err := renderChart(t, bad...); err == nil || !strings.Contains(err.Error(), "image ") {
			t.Errorf("%v: %v, want a refusal naming the image", bad, err)
		}
	}
	m := mustRender(t, "--set", "image.tag=1.2.3")
	for name, d := range m.deployments {
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "mcpbus:1.2.3" {
			t.Errorf("%s: image %s, want mcpbus:1.2.3", name, img)
		}
	}
	if img := m.jobs["mcpbus-migrate"].Spec.Template.Spec.Containers[0].Image; img != "mcpbus:1.2.3" {
		t.Errorf("the migrations Job runs %s, not the services' image", img)
	}
}

// TestHelmMigrationsJob: migrations run once per install and upgrade, as a
// Job hooked before the release's objects change, running `mcpbus migrate`
// with the migrate Secret's database URL and nothing else; with
// secrets.create, that Secret is made by an earlier hook (a pre-install hook
// runs before the release's own objects exist).
func TestHelmMigrationsJob(t *testing.T) {
	m := mustRender(t, secretsCreateArgs(t, secretValues(t))...)
	j := m.jobs["mcpbus-migrate"]
	if j == nil {
		t.Fatal("no Job mcpbus-migrate")
	}
	if hooks := j.Annotations["helm.sh/hook"]; hooks != "pre-install,pre-upgrade" {
		t.Errorf("the Job's hooks %q, want pre-install,pre-upgrade", hooks)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"migrate"}) || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the Job runs %v (restart %s), want mcpbus migrate", c.Args, j.Spec.Template.Spec.RestartPolicy)
	}
	checkIdentity(t, j.Name, "migrate", c)
	sec := m.secrets["mcpbus-migrate"]
	if sec == nil {
		t.Fatal("secrets.create: no Secret mcpbus-migrate")
	}
	sw, err1 := strconv.Atoi(sec.Annotations["helm.sh/hook-weight"])
	jw, err2 := strconv.Atoi(j.Annotations["helm.sh/hook-weight"])
	if sec.Annotations["helm.sh/hook"] != j.Annotations["helm.sh/hook"] || err1 != nil || err2 != nil || sw >= jw {
		t.Errorf("the migrate Secret (hook %q weight %q) is not made by a hook before the Job's (weight %q)",
			sec.Annotations["helm.sh/hook"], sec.Annotations["helm.sh/hook-weight"], j.Annotations["helm.sh/hook-weight"])
	}
	if off := mustRender(t, "--set", "migrations.enabled=false"); len(off.jobs) != 0 {
		t.Error("migrations.enabled=false still renders the Job")
	}
	// With servicesAutoMigrate off, every service's settings turn its own
	// migrations off: the Job is the schema's one writer.
	autoMigrate := func(m *manifests) map[string]any {
		out := map[string]any{}
		for _, file := range []string{"config.yaml", "services.yaml"} {
			var cfg struct {
				Database map[string]any `json:"database"`
			}
			if err := yaml.Unmarshal([]byte(m.configMaps["mcpbus-config"].Data[file]), &cfg); err != nil {
				t.Fatal(err)
			}
			out[file] = cfg.Database["auto_migrate"]
		}
		return out
	}
	if got := autoMigrate(mustRender(t, "--set", "migrations.servicesAutoMigrate=false")); got["config.yaml"] != false || got["services.yaml"] != false {
		t.Errorf("migrations.servicesAutoMigrate=false: database.auto_migrate %v, want false for the api and the other services", got)
	}
	if got := autoMigrate(m); got["config.yaml"] != false || got["services.yaml"] != false {
		t.Errorf("default: database.auto_migrate %v, want false (the Job migrates, the services check the schema)", got)
	}
	if got := autoMigrate(mustRender(t, "--set", "migrations.servicesAutoMigrate=true")); got["config.yaml"] != nil || got["services.yaml"] != nil {
		t.Errorf("migrations.servicesAutoMigrate=true: database.auto_migrate %v, want unset (services migrate at start as well)", got)
	}
}

// secretValues are a distinct random value for every secret the chart
// handles: the passwords accounts.conf reads (by variable), the services'
// NATS passwords ("svc:<service>"), the database URLs ("db",
// "migrate-db"), the credentials key ("key") and the admin key's hash
// ("admin").
func secretValues(t *testing.T) map[string]string {
	t.Helper()
	pw := testPasswords(t)
	for _, k := range []string{"db", "migrate-db", "key", "admin"} {
		tok, err := bus.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		pw[k] = tok
	}
	// A service's NATS password is its user's in accounts.conf: one value
	// for both (MCPBUS_NATS_<SERVICE>_PASSWORD).
	for svc := range mcpbusServices {
		pw["svc:"+svc] = pw[config.NATSServicePasswordVar(svc)]
	}
	return pw
}

// secretsCreateArgs render the chart with secrets.create and a distinct
// value for every secret: the passwords accounts.conf reads, the service
// users' passwords, the database URLs, the credentials key and the admin
// key's hash.
func secretsCreateArgs(t *testing.T, pw map[string]string) []string {
	t.Helper()
	args := []string{"--set", "secrets.create=true"}
	for v, p := range pw {
		user := strings.ReplaceAll(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(v, "MCPBUS_NATS_"), "_PASSWORD")), "_", "-")
		args = append(args, "--set-string", "secrets.natsPasswords."+user+"="+p)
	}
	for svc := range mcpbusServices {
		args = append(args, "--set-string", "secrets.natsPasswords."+svc+"="+pw["svc:"+svc])
	}
	return append(args, "--set-string", "secrets.databaseURL="+pw["db"], "--set-string", "secrets.migrateDatabaseURL="+pw["migrate-db"],
		"--set-string", "secrets.credentialsKey="+pw["key"], "--set-string", "secrets.adminKeySHA256="+pw["admin"])
}

// TestHelmIdentities is the attack on least privilege: with every secret a
// distinct value, a pod of each service can read (environment, envFrom,
// volumes) exactly the values its service needs: the taskpoller and
// toolcall never see the credentials key, no
// service another's NATS password, none the migrations' database URL;
// every service Secret holds only its keys; the NATS servers get exactly
// the passwords accounts.conf reads; no secret value appears in any object
// other than a Secret.
func TestHelmIdentities(t *testing.T) {
	pw := secretValues(t)
	out, err := renderChart(t, secretsCreateArgs(t, pw)...)
	if err != nil {
		t.Fatal(err)
	}
	m := parseManifests(t, "helm template (secrets.create)", out)
	// What each Secret key holds.
	value := func(secret, key string) string { return m.secrets[secret].StringData[key] }
	for svc, keys := range serviceSecretKeys {
		s := m.secrets["mcpbus-"+svc]
		if s == nil {
			t.Errorf("no Secret mcpbus-%s", svc)
			continue
		}
		var got []string
		for k := range s.StringData {
			got = append(got, k)
		}
		sort.Strings(got)
		if !slices.Equal(got, keys) {
			t.Errorf("Secret mcpbus-%s holds %v, want exactly %v", svc, got, keys)
		}
	}
	if got := value("mcpbus-migrate", "database-url"); got != pw["migrate-db"] {
		t.Errorf("the migrate Secret's database URL %q, want secrets.migrateDatabaseURL", got)
	}
	natsSecret := m.secrets["mcpbus-nats-passwords"]
	var vars []string
	for k, v := range natsSecret.StringData {
		vars = append(vars, k)
		if v != pw[k] {
			t.Errorf("mcpbus-nats-passwords %s does not hold its password", k)
		}
	}
	sort.Strings(vars)
	if want := accountsVars(t); !slices.Equal(vars, want) {
		t.Errorf("mcpbus-nats-passwords holds %v, accounts.conf reads %v", vars, want)
	}

	// readable is every secret value a pod template can read.
	readable := func(pod corev1.PodSpec) map[string]bool {
		out := map[string]bool{}
		for _, c := range pod.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					out[value(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)] = true
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					for _, v := range m.secrets[ef.SecretRef.Name].StringData {
						out[v] = true
					}
				}
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil && m.secrets[v.Secret.SecretName] != nil {
				for _, val := range m.secrets[v.Secret.SecretName].StringData {
					out[val] = true
				}
			}
		}
		return out
	}
	needs := map[string][]string{
		"api":        {"db", "key", "admin", "svc:api"},
		"discovery":  {"db", "svc:discovery"},
		"toolcall":   {"db", "svc:toolcall"},
		"taskpoller": {"db", "svc:taskpoller"},
		"tokens":     {"db", "key", "svc:tokens"},
	}
	for svc, want := range needs {
		got := readable(m.deployments["mcpbus-"+svc].Spec.Template.Spec)
		want = append(want, config.NATSServicePasswordVar(svc)) // the same value as svc:<svc>
		for k, v := range pw {
			if got[v] != slices.Contains(want, k) {
				t.Errorf("mcpbus-%s can read %s: %v, want %v", svc, k, got[v], slices.Contains(want, k))
			}
		}
	}
	if got := readable(m.jobs["mcpbus-migrate"].Spec.Template.Spec); len(got) != 1 || !got[pw["migrate-db"]] {
		t.Errorf("the migrations Job reads %d secret values, want only the migrations' database URL", len(got))
	}
	for _, doc := range docSeparator.Split(out, -1) {
		if strings.Contains(doc, "\nkind: Secret\n") {
			continue
		}
		for k, v := range pw {
			if strings.Contains(doc, v) {
				t.Errorf("the secret %s appears outside a Secret:\n%s", k, doc)
			}
		}
	}
	if _, err := renderChart(t, "--set", "secrets.create=true"); err == nil || !strings.Contains(err.Error(), "secrets.") {
		t.Errorf("secrets.create without values: %v, want an error naming the missing value", err)
	}
}

// TestHelmExternalNATS: with nats.enabled=false the chart makes no NATS
// objects and the services connect to nats.externalURL (a missing URL
// fails the render naming the value); the rest passes the same checks.
func TestHelmExternalNATS(t *testing.T) {
	if _, err := renderChart(t, "--set", "nats.enabled=false"); err == nil || !strings.Contains(err.Error(), "nats.externalURL") {
		t.Errorf("nats.enabled=false without a URL: %v, want an error naming nats.externalURL", err)
	}
	m := mustRender(t, "--set", "nats.enabled=false", "--set", "nats.externalURL=tls://nats.example.internal:4222")
	if len(m.statefulSets) != 0 || m.configMaps["mcpbus-nats-config"] != nil || m.services["mcpbus-nats"] != nil {
		t.Errorf("external NATS: the chart still makes NATS objects")
	}
	m.secrets = loadManifests(t).secrets
	checkDeployments(t, m, "mcpbus:"+chartAppVersion(t))
	checkReferences(t, m)
	for svc := range mcpbusServices {
		for _, e := range m.deployments["mcpbus-"+svc].Spec.Template.Spec.Containers[0].Env {
			if e.Name == "MCPBUS_NATS_URL" && e.Value != "tls://nats.example.internal:4222" {
				t.Errorf("mcpbus-%s: NATS URL %s, want nats.externalURL", svc, e.Value)
			}
		}
	}
}
