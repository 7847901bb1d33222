package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// describedRegistry records the families registered on it: name → label
// names (variable and constant).
type describedRegistry struct {
	*prometheus.Registry
	families map[string][]string
	kinds    map[string]bool // histograms
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descVar    = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	labelNames = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)=`)
)

func (r *describedRegistry) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		var labels []string
		if v := descVar.FindStringSubmatch(s); v != nil && v[1] != "" {
			labels = append(labels, strings.Split(v[1], ",")...)
		}
		if cl := descConst.FindStringSubmatch(s); cl != nil {
			for _, l := range labelNames.FindAllStringSubmatch(cl[1], -1) {
				labels = append(labels, l[1])
			}
		}
		r.families[m[1]] = labels
		if _, ok := c.(prometheus.Histogram); ok {
			r.kinds[m[1]] = true
		}
		if _, ok := c.(*prometheus.HistogramVec); ok {
			r.kinds[m[1]] = true
		}
	}
	return r.Registry.Register(c)
}

func (r *describedRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// every service's families, as dev mode's one registry has them.
func allFamilies(t *testing.T) *describedRegistry {
	t.Helper()
	r := &describedRegistry{Registry: prometheus.NewRegistry(), families: map[string][]string{}, kinds: map[string]bool{}}
	metrics.All(r)
	return r
}

var (
	metricRef = regexp.MustCompile(`\bmcpbus_[a-z0-9_]+`)
	// selector is a metric with a label matcher block.
	selector = regexp.MustCompile(`(mcpbus_[a-z0-9_]+)\{([^}]*)\}`)
	// grouping is "by (a, b)" after an aggregation over one metric.
	grouping = regexp.MustCompile(`by \(([^)]*)\)`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// checkExpr fails when expr names a metric no registry has, or a label the
// metric lacks (in a selector, or in a by clause of an expression over
// mcpbus metrics only).
func checkExpr(errorf func(string, ...any), r *describedRegistry, where, expr string) {
	var used []string
	for _, name := range metricRef.FindAllString(expr, -1) {
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && r.kinds[b] {
				base = b
			}
		}
		labels, ok := r.families[base]
		if !ok {
			errorf("%s: metric %s is not defined by any service (expr %s)", where, name, expr)
			continue
		}
		_ = labels
		used = append(used, base)
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		base := strings.TrimSuffix(m[1], "_bucket")
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(r.families[base], l[1]) {
				errorf("%s: %s has no label %q (expr %s)", where, m[1], l[1], expr)
			}
		}
	}
	// Labels every series has from the scrape, and le of histograms.
	scrape := []string{"instance", "job", "le"}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || slices.Contains(scrape, l) {
				continue
			}
			found := false
			for _, u := range used {
				if slices.Contains(r.families[u], l) {
					found = true
				}
			}
			if !found {
				errorf("%s: no metric of the expression has label %q (expr %s)", where, l, expr)
			}
		}
	}
}

func deployFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The Grafana dashboard parses as JSON and every query in it uses metrics
// and labels the services define, so the two cannot drift apart.
func TestDashboardUsesDefinedMetrics(t *testing.T) {
	t.Parallel()
	r := allFamilies(t)
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(deployFile(t, "grafana/mcpbus.json"), &dash); err != nil {
		t.Fatalf("grafana/mcpbus.json: %v", err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("dashboard title %q uid %q", dash.Title, dash.UID)
	}
	seen := map[string]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			checkExpr(t.Errorf, r, "dashboard panel "+p.Title, tg.Expr)
			for _, n := range metricRef.FindAllString(tg.Expr, -1) {
				seen[strings.TrimSuffix(n, "_bucket")] = true
			}
		}
	}
	if queries < 20 {
		t.Errorf("the dashboard has %d queries", queries)
	}
	// Every mcpbus family is on the dashboard.
	for name := range r.families {
		if strings.HasPrefix(name, "mcpbus_") && !seen[name] {
			t.Errorf("metric %s is on no dashboard panel", name)
		}
	}
}

// The alert rules parse as a Prometheus rule file, cover the failure modes
// (upstream down, poll lag, dead letters, refresh failures), and use only
// metrics and labels the services define.
func TestAlertRulesUseDefinedMetrics(t *testing.T) {
	t.Parallel()
	r := allFamilies(t)
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(deployFile(t, "prometheus/alerts.yaml"))))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("prometheus/alerts.yaml: %v", err)
	}
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" || rule.Expr == "" || rule.Labels["severity"] == "" || rule.Annotations["summary"] == "" {
				t.Errorf("rule %+v lacks alert, expr, severity or summary", rule)
			}
			alerts[rule.Alert] = true
			checkExpr(t.Errorf, r, "alert "+rule.Alert, rule.Expr)
		}
	}
	for _, want := range []string{"MCPBusUpstreamDown", "MCPBusTaskPollLag", "MCPBusTaskDeadLetters", "MCPBusTokenRefreshFailures"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// The drift check itself notices an unknown metric and an unknown label,
// and accepts what the services define.
func TestCheckExprCatchesDrift(t *testing.T) {
	t.Parallel()
	r := allFamilies(t)
	for expr, bad := range map[string]bool{
		`rate(mcpbus_toolcall_callz_total[5m])`:                                                             true,
		`rate(mcpbus_toolcall_calls_total{user="x"}[5m])`:                                                   true,
		`sum by (thread) (rate(mcpbus_toolcall_calls_total[5m]))`:                                           true,
		`histogram_quantile(0.9, sum by (le) (rate(mcpbus_tokens_fetches_bucket[5m])))`:                     true,
		`sum by (server, code) (rate(mcpbus_toolcall_errors_total{code="internal"}[5m]))`:                   false,
		`histogram_quantile(0.9, sum by (le, server) (rate(mcpbus_discovery_duration_seconds_bucket[5m])))`: false,
		`increase(mcpbus_nats_reconnects_total{service="api"}[5m])`:                                         false,
	} {
		var errs []string
		checkExpr(func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }, r, "test", expr)
		if bad != (len(errs) > 0) {
			t.Errorf("%s: errors %q, want bad=%v", expr, errs, bad)
		}
	}
}
