package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// manifests are Kubernetes objects (deploy/k8s's files or a helm template
// output), decoded strictly.
type manifests struct {
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret // secrets.example.yaml, or the chart's with secrets.create
	services      map[string]*corev1.Service
	deployments   map[string]*appsv1.Deployment
	statefulSets  map[string]*appsv1.StatefulSet
	jobs          map[string]*batchv1.Job
	pdbs          []*policyv1.PodDisruptionBudget
	hpas          []*autoscalingv2.HorizontalPodAutoscaler
	scaledObjects []*scaledObject
	certificates  []*certificate
	policies      []*networkingv1.NetworkPolicy
}

func newManifests() *manifests {
	return &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, deployments: map[string]*appsv1.Deployment{},
		statefulSets: map[string]*appsv1.StatefulSet{}, jobs: map[string]*batchv1.Job{}}
}

// strictDecode turns one YAML document into JSON (duplicate keys refused)
// and decodes it into out refusing unknown fields.
func strictDecode(doc []byte, out any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

// loadManifests decodes deploy/k8s's files; Secrets may only be in
// secrets.example.yaml (the operator creates them).
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := newManifests()
	files, err := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s: %v", err)
	}
	for _, file := range files {
		before := len(m.secrets)
		m.add(t, file, readFile(t, file))
		if filepath.Base(file) != "secrets.example.yaml" && len(m.secrets) != before {
			t.Errorf("%s: a Secret outside secrets.example.yaml (the operator creates Secrets)", file)
		}
	}
	return m
}

// parseManifests decodes a multi-document stream, such as helm template's.
func parseManifests(t *testing.T, where, stream string) *manifests {
	t.Helper()
	m := newManifests()
	m.add(t, where, stream)
	return m
}

var (
	docSeparator = regexp.MustCompile(`(?m)^---\s*$`)
	commentLine  = regexp.MustCompile(`(?m)^\s*#.*$`)
)

// add decodes every document of stream strictly into its k8s.io/api type
// (or the CRD mirrors of crd_types_test.go); an unknown kind fails.
func (m *manifests) add(t *testing.T, file, stream string) {
	t.Helper()
	for i, doc := range docSeparator.Split(stream, -1) {
		if strings.TrimSpace(commentLine.ReplaceAllString(doc, "")) == "" {
			continue
		}
		where := fmt.Sprintf("%s document %d", file, i+1)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "apps/v1 StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "autoscaling/v2 HorizontalPodAutoscaler":
			obj = &autoscalingv2.HorizontalPodAutoscaler{}
		case "keda.sh/v1alpha1 ScaledObject":
			obj = &scaledObject{}
		case "cert-manager.io/v1 Certificate":
			obj = &certificate{}
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		default:
			t.Fatalf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
		}
		if err := strictDecode([]byte(doc), obj); err != nil {
			t.Fatalf("%s (%s): %v", where, tm.Kind, err)
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			m.configMaps[o.Name] = o
		case *corev1.Secret:
			m.secrets[o.Name] = o
		case *corev1.Service:
			m.services[o.Name] = o
		case *appsv1.Deployment:
			m.deployments[o.Name] = o
		case *appsv1.StatefulSet:
			m.statefulSets[o.Name] = o
		case *batchv1.Job:
			m.jobs[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			m.hpas = append(m.hpas, o)
		case *scaledObject:
			m.scaledObjects = append(m.scaledObjects, o)
		case *certificate:
			m.certificates = append(m.certificates, o)
		case *networkingv1.NetworkPolicy:
			m.policies = append(m.policies, o)
		}
	}
}

// workloads are the pod templates of the Deployments and StatefulSets.
func (m *manifests) workloads() map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for n, d := range m.deployments {
		out[n] = &d.Spec.Template
	}
	for n, s := range m.statefulSets {
		out[n] = &s.Spec.Template
	}
	return out
}

// selects is a label selector's meaning: an empty one selects every pod.
func selects(sel *metav1.LabelSelector, pod map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(pod))
}

// serviceSecretKeys is what each service reads from its own Secret, found
// in the code: the database for the services that open one (tokens,
// toolcall's task rows and audit, taskpoller, api), the credentials key
// where crypto.FromEnv is called (tokens, api), the admin key's hash only
// in the api's config.yaml. The migrations Job reads the database URL only.
var serviceSecretKeys = map[string][]string{
	"api":        {"admin-key-sha256", "credentials-key", "database-url", "nats-password"},
	"discovery":  {"database-url", "nats-password"},
	"toolcall":   {"database-url", "nats-password"},
	"taskpoller": {"database-url", "nats-password"},
	"tokens":     {"credentials-key", "database-url", "nats-password"},
	"migrate":    {"database-url"},
}

// secretEnv is the variable mcpbus reads a Secret key into; the NATS
// password is MCPBUS_NATS_<SERVICE>_PASSWORD, the variable nats-server
// reads for the service's user too.
func secretEnv(svc, key string) string {
	if key == "nats-password" {
		return "MCPBUS_NATS_" + strings.ToUpper(svc) + "_PASSWORD"
	}
	return map[string]string{"admin-key-sha256": "MCPBUS_ADMIN_KEY_SHA256", "credentials-key": "MCPBUS_CREDENTIALS_KEY",
		"database-url": "MCPBUS_DATABASE_URL"}[key]
}

// TestK8sDeployments checks deploy/k8s's Deployments (checkDeployments).
func TestK8sDeployments(t *testing.T) {
	checkDeployments(t, loadManifests(t), "mcpbus:"+chartAppVersion(t))
}

// checkDeployments: a Deployment per service running `serve <service>` on
// image as a non-root user, with readiness on /readyz and liveness on
// /healthz on a port the container exposes and the process listens on,
// resource requests, the ConfigMap it reads, and its own identity: only its
// own Secret, only the keys it needs, NATS as the user mcpbus-<service>.
// Autoscaled Deployments carry no replicas (re-applying would reset the
// autoscaler's count); the others at least 2.
func checkDeployments(t *testing.T, m *manifests, image string) {
	t.Helper()
	settings := loadSettings(t, filepath.Join("config", "config.yaml"))
	_, apiPort, err := net.SplitHostPort(settings.API.Listen)
	if err != nil {
		t.Fatal(err)
	}
	autoscaled := m.autoscaled()
	for svc := range mcpbusServices {
		d, ok := m.deployments["mcpbus-"+svc]
		if !ok {
			t.Errorf("no Deployment mcpbus-%s", svc)
			continue
		}
		if len(d.Spec.Selector.MatchLabels) == 0 || !selects(d.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("%s: selector %v does not match its pods %v", d.Name, d.Spec.Selector, d.Spec.Template.Labels)
		}
		switch {
		case autoscaled[d.Name] && d.Spec.Replicas != nil:
			t.Errorf("%s: replicas %d on an autoscaled Deployment (an apply resets the autoscaler's count)", d.Name, *d.Spec.Replicas)
		case !autoscaled[d.Name] && (d.Spec.Replicas == nil || *d.Spec.Replicas < 2):
			t.Errorf("%s: replicas %v, want at least 2 (one may be disrupted)", d.Name, d.Spec.Replicas)
		}
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %d containers", d.Name, len(pod.Containers))
		}
		c := pod.Containers[0]
		if c.Image != image || len(c.Command) != 0 {
			t.Errorf("%s: image %s command %v, want %s with the image's entrypoint", d.Name, c.Image, c.Command, image)
		}
		if len(c.Args) < 2 || c.Args[0] != "serve" || c.Args[1] != svc {
			t.Errorf("%s: args %v, want serve %s", d.Name, c.Args, svc)
		}
		listen := apiPort
		if svc != "api" {
			i := slices.Index(c.Args, "--health-listen")
			if i < 0 || i+1 >= len(c.Args) {
				t.Errorf("%s: args %v without --health-listen", d.Name, c.Args)
				continue
			}
			if _, listen, err = net.SplitHostPort(c.Args[i+1]); err != nil {
				t.Fatal(err)
			}
			// Prometheus scrapes --metrics-listen on the port named metrics.
			j := slices.Index(c.Args, "--metrics-listen")
			if j < 0 || j+1 >= len(c.Args) {
				t.Errorf("%s: args %v without --metrics-listen", d.Name, c.Args)
			} else if _, mport, err := net.SplitHostPort(c.Args[j+1]); err != nil || fmt.Sprint(containerPort(c, "metrics")) != mport {
				t.Errorf("%s: --metrics-listen %s, but the container's metrics port is %d", d.Name, c.Args[j+1], containerPort(c, "metrics"))
			}
		}
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", d.Name, p.name)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s: %s probe on %s, want %s", d.Name, p.name, p.probe.HTTPGet.Path, p.path)
			}
			port := containerPort(c, p.probe.HTTPGet.Port.String())
			if port == 0 {
				t.Errorf("%s: %s probe on port %s, which the container does not expose", d.Name, p.name, p.probe.HTTPGet.Port.String())
			} else if fmt.Sprint(port) != listen {
				t.Errorf("%s: %s probe on port %d, but the process listens on %s", d.Name, p.name, port, listen)
			}
		}
		checkResources(t, d.Name, c)
		sc, psc := c.SecurityContext, pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 10001 {
			t.Errorf("%s: pod securityContext %+v, want runAsNonRoot as uid 10001 (the image's user)", d.Name, psc)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container securityContext %+v, want a read-only root and no privilege escalation", d.Name, sc)
		}
		if !mountsAt(c, "/var/lib/mcpbus") || !mountsAt(c, "/etc/mcpbus") {
			t.Errorf("%s: want the config at /etc/mcpbus and a writable home at /var/lib/mcpbus", d.Name)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		checkIdentity(t, d.Name, svc, c)
		for _, name := range []string{"MCPBUS_CONFIG", "MCPBUS_EXTENSIONS_CONFIG"} {
			if !strings.HasPrefix(env[name].Value, "/etc/mcpbus/") {
				t.Errorf("%s: %s = %q, want a file of the mounted ConfigMap", d.Name, name, env[name].Value)
			}
		}
	}
	if extra := len(m.deployments) - len(mcpbusServices); extra != 0 {
		t.Errorf("%d Deployment(s) besides the services", extra)
	}
}

// checkIdentity: the container reads secrets only from the Secret
// mcpbus-<svc>, exactly the keys serviceSecretKeys gives the service, and
// connects to NATS as mcpbus-<svc> with its own password.
func checkIdentity(t *testing.T, name, svc string, c corev1.Container) {
	t.Helper()
	var keys []string
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			if inlineSecret(e) {
				t.Errorf("%s: %s is inline", name, e.Name)
			}
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != "mcpbus-"+svc {
			t.Errorf("%s: %s from Secret %s, want only its own Secret mcpbus-%s", name, e.Name, ref.Name, svc)
		}
		if want := secretEnv(svc, ref.Key); want != e.Name {
			t.Errorf("%s: %s from key %s, want %s", name, e.Name, ref.Key, want)
		}
		keys = append(keys, ref.Key)
	}
	if len(c.EnvFrom) != 0 {
		t.Errorf("%s: envFrom %v: a whole Secret or ConfigMap in the environment", name, c.EnvFrom)
	}
	sort.Strings(keys)
	if want := serviceSecretKeys[svc]; !slices.Equal(keys, want) {
		t.Errorf("%s reads Secret keys %v, want exactly %v", name, keys, want)
	}
	if slices.Contains(serviceSecretKeys[svc], "nats-password") {
		u, err := url.Parse(strings.Split(env["MCPBUS_NATS_URL"].Value, ",")[0])
		if err != nil || u.Host == "" || u.User != nil {
			t.Errorf("%s: MCPBUS_NATS_URL %q, want the NATS address without a user (the service is mcpbus-%s by its password variable)", name, env["MCPBUS_NATS_URL"].Value, svc)
		}
	}
}

// credentialURL is a URL with a password in it.
var credentialURL = regexp.MustCompile(`://[^/@\s]+:[^/@\s]+@`)

// inlineSecret reports whether a secret-looking variable holds a value in
// the manifest itself; a URL without credentials (the NATS address) holds
// none.
func inlineSecret(e corev1.EnvVar) bool {
	if !secretName.MatchString(e.Name) || e.Value == "" {
		return false
	}
	return !strings.HasSuffix(e.Name, "_URL") || credentialURL.MatchString(e.Value)
}

// certifies reports whether a cert-manager Certificate writes the Secret.
func (m *manifests) certifies(secret string) bool {
	return slices.ContainsFunc(m.certificates, func(c *certificate) bool { return c.Spec.SecretName == secret })
}

// autoscaled are the Deployments an HPA or a KEDA ScaledObject scales.
func (m *manifests) autoscaled() map[string]bool {
	out := map[string]bool{}
	for _, h := range m.hpas {
		out[h.Spec.ScaleTargetRef.Name] = true
	}
	for _, s := range m.scaledObjects {
		out[s.Spec.ScaleTargetRef.Name] = true
	}
	return out
}

func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}

func mountsAt(c corev1.Container, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == path })
}

func checkResources(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]
	if cpu.IsZero() || mem.IsZero() {
		t.Errorf("%s: requests %v, want cpu and memory", name, c.Resources.Requests)
	}
	if lim := c.Resources.Limits[corev1.ResourceMemory]; lim.IsZero() || lim.Cmp(mem) < 0 {
		t.Errorf("%s: memory limit %v, want one at or above the request", name, c.Resources.Limits)
	}
}

// TestK8sReferences checks deploy/k8s's references (checkReferences).
func TestK8sReferences(t *testing.T) {
	m := loadManifests(t)
	checkReferences(t, m)
	for _, s := range m.secrets {
		for k, v := range s.StringData {
			if !strings.Contains(v, "REPLACE") {
				t.Errorf("secrets.example.yaml: %s.%s holds a value, want a REPLACE placeholder", s.Name, k)
			}
		}
	}
}

// checkReferences: every Secret key, ConfigMap, volume and Service port a
// manifest names exists (Secrets in secrets.example.yaml or made by the
// chart); every workload has a PodDisruptionBudget; autoscalers target the
// toolcall and taskpoller Deployments (CPU ones, CPU requests).
func checkReferences(t *testing.T, m *manifests) {
	t.Helper()
	templates := m.workloads()
	for name, j := range m.jobs {
		templates[name] = &j.Spec.Template
	}
	for name, tmpl := range templates {
		pod := tmpl.Spec
		vols := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			vols[v.Name] = v
			if v.ConfigMap != nil && m.configMaps[v.ConfigMap.Name] == nil {
				t.Errorf("%s: volume %s: no ConfigMap %s", name, v.Name, v.ConfigMap.Name)
			}
			if v.Secret != nil && m.secrets[v.Secret.SecretName] == nil && !m.certifies(v.Secret.SecretName) {
				t.Errorf("%s: volume %s: no Secret %s in secrets.example.yaml", name, v.Name, v.Secret.SecretName)
			}
		}
		claims := map[string]bool{}
		if s, ok := m.statefulSets[name]; ok {
			for _, c := range s.Spec.VolumeClaimTemplates {
				claims[c.Name] = true
			}
		}
		for _, c := range pod.Containers {
			for _, vm := range c.VolumeMounts {
				if _, ok := vols[vm.Name]; !ok && !claims[vm.Name] {
					t.Errorf("%s: mount of undeclared volume %s", name, vm.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					if inlineSecret(e) {
						t.Errorf("%s: %s is inline", name, e.Name)
					}
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if s := m.secrets[ref.Name]; s == nil {
					t.Errorf("%s: %s from Secret %s, not in secrets.example.yaml", name, e.Name, ref.Name)
				} else if _, ok := s.StringData[ref.Key]; !ok {
					t.Errorf("%s: %s from key %s of Secret %s, which secrets.example.yaml does not list", name, e.Name, ref.Key, ref.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && m.secrets[ef.SecretRef.Name] == nil {
					t.Errorf("%s: envFrom Secret %s not in secrets.example.yaml", name, ef.SecretRef.Name)
				}
				if ef.ConfigMapRef != nil && m.configMaps[ef.ConfigMapRef.Name] == nil {
					t.Errorf("%s: envFrom ConfigMap %s does not exist", name, ef.ConfigMapRef.Name)
				}
			}
		}
		if _, isJob := m.jobs[name]; isJob {
			continue
		}
		covered := slices.ContainsFunc(m.pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			return len(p.Spec.Selector.MatchLabels) > 0 && selects(p.Spec.Selector, tmpl.Labels)
		})
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", name)
		}
	}
	for _, p := range m.pdbs {
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("PodDisruptionBudget %s bounds nothing", p.Name)
		}
	}

	scaled := map[string]bool{}
	for _, h := range m.hpas {
		ref := h.Spec.ScaleTargetRef
		d, ok := m.deployments[ref.Name]
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || !ok {
			t.Errorf("HPA %s targets %s %s %s, which does not exist", h.Name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		scaled[ref.Name] = true
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas <= *h.Spec.MinReplicas {
			t.Errorf("HPA %s: replicas %v..%d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		for _, metric := range h.Spec.Metrics {
			if metric.Resource == nil {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if q := c.Resources.Requests[metric.Resource.Name]; q.IsZero() {
					t.Errorf("HPA %s scales on %s utilization, which %s does not request", h.Name, metric.Resource.Name, c.Name)
				}
			}
		}
	}
	for _, so := range m.scaledObjects {
		ref := so.Spec.ScaleTargetRef
		if _, ok := m.deployments[ref.Name]; !ok || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" {
			t.Errorf("ScaledObject %s targets %s %s %s, which does not exist", so.Name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		scaled[ref.Name] = true
	}
	for _, want := range []string{"mcpbus-toolcall", "mcpbus-taskpoller"} {
		if !scaled[want] {
			t.Errorf("no autoscaler (HorizontalPodAutoscaler or ScaledObject) for %s", want)
		}
	}

	for _, s := range m.services {
		var target *corev1.PodTemplateSpec
		for _, tmpl := range m.workloads() {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
				target = tmpl
			}
		}
		if target == nil {
			t.Errorf("Service %s selects no workload", s.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if containerPort(target.Spec.Containers[0], p.TargetPort.String()) == 0 {
				t.Errorf("Service %s: targetPort %s is not a container port", s.Name, p.TargetPort.String())
			}
		}
	}
}

// TestK8sNetworkPolicy: ingress to every mcpbus pod is denied by default;
// the api takes 8001 from anywhere; NATS takes clients on 4222 from the
// services and labelled agent workers, and routes on 6222 only from its
// own nodes; the other services take nothing.
func TestK8sNetworkPolicy(t *testing.T) {
	checkNetworkPolicy(t, loadManifests(t))
}

func checkNetworkPolicy(t *testing.T, m *manifests) {
	t.Helper()
	allowed := func(pod map[string]string, port int, from map[string]string) bool {
		for _, p := range m.policies {
			if !selects(&p.Spec.PodSelector, pod) {
				continue
			}
			for _, rule := range p.Spec.Ingress {
				portOK := len(rule.Ports) == 0
				for _, rp := range rule.Ports {
					portOK = portOK || (rp.Port != nil && rp.Port.IntValue() == port)
				}
				peerOK := len(rule.From) == 0
				for _, peer := range rule.From {
					peerOK = peerOK || (peer.PodSelector != nil && selects(peer.PodSelector, from))
				}
				if portOK && peerOK {
					return true
				}
			}
		}
		return false
	}
	outsider := map[string]string{"app": "something-else"}
	agent := map[string]string{"mcpbus.io/nats-client": "true"}
	for name, tmpl := range m.workloads() {
		denied := slices.ContainsFunc(m.policies, func(p *networkingv1.NetworkPolicy) bool {
			return selects(&p.Spec.PodSelector, tmpl.Labels) && slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		})
		if !denied {
			t.Errorf("%s: no NetworkPolicy restricts its ingress", name)
		}
		switch name {
		case "mcpbus-api":
			if !allowed(tmpl.Labels, 8001, outsider) {
				t.Error("the api does not take 8001 from outside")
			}
		case "mcpbus-nats":
			toolcall := m.deployments["mcpbus-toolcall"].Spec.Template.Labels
			if !allowed(tmpl.Labels, 4222, toolcall) || !allowed(tmpl.Labels, 4222, agent) {
				t.Error("NATS does not take clients on 4222 from the services and agent workers")
			}
			if allowed(tmpl.Labels, 4222, outsider) || allowed(tmpl.Labels, 6222, toolcall) || !allowed(tmpl.Labels, 6222, tmpl.Labels) {
				t.Error("NATS: 4222 open to unlabelled pods, or 6222 open beyond its own nodes")
			}
		default:
			for _, port := range []int{8081, 8001, 4222, 9464} {
				if allowed(tmpl.Labels, port, outsider) || allowed(tmpl.Labels, port, agent) {
					t.Errorf("%s takes connections on %d", name, port)
				}
			}
			if !allowed(tmpl.Labels, 9464, map[string]string{"mcpbus.io/prometheus": "true"}) {
				t.Errorf("%s: Prometheus cannot scrape its metrics port 9464", name)
			}
		}
	}
}
