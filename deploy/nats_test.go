package deploy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// accountsVars are the environment variables accounts.conf reads (the
// users' passwords), sorted.
func accountsVars(t *testing.T) []string {
	t.Helper()
	var vars []string
	for _, m := range regexp.MustCompile(`password:\s*\$([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(readFile(t, filepath.Join("nats", "accounts.conf")), -1) {
		if !slices.Contains(vars, m[1]) {
			vars = append(vars, m[1])
		}
	}
	sort.Strings(vars)
	if len(vars) < 2 {
		t.Fatalf("accounts.conf reads %v; want the services' and agents' passwords", vars)
	}
	return vars
}

// natsOptions processes dir/cluster.conf (which includes accounts.conf)
// as nats-server does, with the node name and passwords in the environment
// and the certificates of certs (testCerts) where it expects certs.sh's.
func natsOptions(t *testing.T, dir, node string, passwords map[string]string, certs string) *server.Options {
	t.Helper()
	withCerts(t, dir, certs)
	t.Setenv("NATS_SERVER_NAME", node)
	for k, v := range passwords {
		t.Setenv(k, v)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "cluster.conf"))
	if err != nil {
		t.Fatalf("%s/cluster.conf: %v", dir, err)
	}
	return opts
}

// serviceUsers are the services' own NATS users.
var serviceUsers = []string{bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI}

func testPasswords(t *testing.T) map[string]string {
	t.Helper()
	pw := map[string]string{}
	for _, v := range accountsVars(t) {
		tok, err := bus.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		pw[v] = tok
	}
	return pw
}

func routeHosts(opts *server.Options) []string {
	var hosts []string
	for _, r := range opts.Routes {
		hosts = append(hosts, r.Hostname()+":"+r.Port())
	}
	sort.Strings(hosts)
	return hosts
}

// checkNode: the settings both clusters share and the users of
// accounts.conf with their passwords from the environment.
func checkNode(t *testing.T, where string, opts *server.Options, node string, pw map[string]string) {
	t.Helper()
	if opts.ServerName != node || opts.Port != 4222 || opts.HTTPSPort != 8222 || opts.HTTPPort != 0 || opts.Cluster.Port != 6222 || opts.Cluster.Name != "mcpbus" {
		t.Errorf("%s: server %q ports %d/%d/%d (https %d) cluster %q", where, opts.ServerName, opts.Port, opts.Cluster.Port, opts.HTTPPort, opts.HTTPSPort, opts.Cluster.Name)
	}
	// TLS: clients, routes (both ways) and monitoring (https above).
	if opts.TLSConfig == nil || opts.TLSConfig.ClientCAs == nil || opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("%s: TLS on clients %v, routes %v; want both, routes verified both ways", where, opts.TLSConfig != nil, opts.Cluster.TLSConfig != nil)
	}
	if !opts.JetStream || opts.StoreDir != "/data/jetstream" || opts.MaxPayload != 8<<20 {
		t.Errorf("%s: jetstream %v store %s max_payload %d", where, opts.JetStream, opts.StoreDir, opts.MaxPayload)
	}
	users := map[string]string{}
	for _, u := range opts.Users {
		users[u.Username] = u.Password
	}
	for _, svc := range serviceUsers {
		if users[svc] == "" || users[svc] != pw[config.NATSServicePasswordVar(svc)] {
			t.Errorf("%s: accounts.conf has no user %s with its password from %s", where, svc, config.NATSServicePasswordVar(svc))
		}
	}
	if users["mcpbus-services"] != "" || users["agent-alice"] != pw["MCPBUS_NATS_AGENT_ALICE_PASSWORD"] {
		t.Errorf("%s: accounts.conf users %d: the all-powerful mcpbus-services is back, or agent passwords are not from the environment", where, len(users))
	}
}

// TestNATSClusterConfigs: compose's and Kubernetes' cluster.conf load in
// nats-server with accounts.conf; each routes to every node of its
// cluster by the names compose and the StatefulSet give them; the NATS
// nodes get exactly the passwords accounts.conf reads (compose from
// nats.env, Kubernetes from the Secret mcpbus-nats-passwords), and the
// Kubernetes copy of accounts.conf is the file.
func TestNATSClusterConfigs(t *testing.T) {
	pw := testPasswords(t)
	vars := accountsVars(t)
	certs := testCerts(t)

	// compose
	dir := t.TempDir()
	copyTree(t, "nats", dir)
	opts := natsOptions(t, dir, "nats-2", pw, certs)
	checkNode(t, "compose", opts, "nats-2", pw)
	var want []string
	for _, n := range natsNodes {
		want = append(want, n+":6222")
	}
	if got := routeHosts(opts); !slices.Equal(got, want) {
		t.Errorf("compose cluster.conf routes %v, want %v (the compose services)", got, want)
	}
	_, secrets := generateSecrets(t)
	var got []string
	for k := range envFile(t, secrets["nats.env"]) {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, vars) {
		t.Errorf("generate.sh's nats.env sets %v, accounts.conf reads %v", got, vars)
	}

	// Kubernetes: deploy/k8s's files (the chart's defaults) for the copy of
	// accounts.conf, the chart with TLS on for the node's settings.
	k8s := loadManifests(t)
	if cm := k8s.configMaps["mcpbus-nats-config"]; cm == nil || cm.Data["accounts.conf"] != readFile(t, filepath.Join("nats", "accounts.conf")) {
		t.Error("deploy/k8s's ConfigMap mcpbus-nats-config's accounts.conf differs from deploy/nats/accounts.conf")
	}
	m := mustRender(t, "--set", "tls.enabled=true")
	kcerts := t.TempDir()
	writeTestCA(t, kcerts, "localhost", "mcpbus-nats", "*.mcpbus-nats-headless")
	cm, sts := m.configMaps["mcpbus-nats-config"], m.statefulSets["mcpbus-nats"]
	if cm == nil || sts == nil {
		t.Fatal("no ConfigMap mcpbus-nats-config or StatefulSet mcpbus-nats")
	}
	if cm.Data["accounts.conf"] != readFile(t, filepath.Join("nats", "accounts.conf")) {
		t.Error("the ConfigMap mcpbus-nats-config's accounts.conf differs from deploy/nats/accounts.conf")
	}
	kdir := t.TempDir()
	for name, content := range cm.Data {
		content = strings.ReplaceAll(content, "/etc/nats-tls/", kcerts+"/")
		if err := os.WriteFile(filepath.Join(kdir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts = natsOptions(t, kdir, "mcpbus-nats-1", pw, "")
	checkNode(t, "k8s", opts, "mcpbus-nats-1", pw)
	want = want[:0]
	for i := range int(*sts.Spec.Replicas) {
		want = append(want, fmt.Sprintf("%s-%d.%s:6222", sts.Name, i, sts.Spec.ServiceName))
	}
	if got := routeHosts(opts); !slices.Equal(got, want) || len(want) != len(natsNodes) {
		t.Errorf("k8s cluster.conf routes %v, want %v (the StatefulSet's pods)", got, want)
	}
	if _, ok := m.services[sts.Spec.ServiceName]; !ok {
		t.Errorf("the StatefulSet's serviceName %s is not a Service", sts.Spec.ServiceName)
	}
	if sec := k8s.secrets["mcpbus-nats-passwords"]; sec == nil {
		t.Error("no Secret mcpbus-nats-passwords in secrets.example.yaml")
	} else {
		got = got[:0]
		for k := range sec.StringData {
			got = append(got, k)
		}
		sort.Strings(got)
		if !slices.Equal(got, vars) {
			t.Errorf("Secret mcpbus-nats-passwords has %v, accounts.conf reads %v", got, vars)
		}
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
		return e.SecretRef != nil && e.SecretRef.Name == "mcpbus-nats-passwords"
	}) || c.Env[0].Name != "NATS_SERVER_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("the NATS pods do not get the passwords from the Secret and their pod name as NATS_SERVER_NAME")
	}
	checkResources(t, sts.Name, c)
	for _, probe := range []string{"readiness", "liveness"} {
		p := c.ReadinessProbe
		if probe == "liveness" {
			p = c.LivenessProbe
		}
		if p == nil || p.HTTPGet == nil || !strings.HasPrefix(p.HTTPGet.Path, "/healthz") || containerPort(c, p.HTTPGet.Port.String()) != 8222 {
			t.Errorf("NATS %s probe %+v, want /healthz on the monitoring port 8222", probe, p)
		}
	}
}

// TestNATSPermissionsOnTheShippedCluster runs one node of compose's
// cluster.conf with accounts.conf and certs.sh's certificates (routes off,
// free ports) and exercises it: a plaintext client and one that does not
// trust the deployment CA are refused; over TLS each service's own user
// sets up the JetStream buckets and streams it uses, toolcall serves
// mcpbus.tools.call and mcpbus.internal.call, the api and the task poller
// reach it; alice's agent worker reaches the services on her own subjects
// and gets the reply on her inbox, but the server refuses her publishing
// mcpbus.internal.>, bob's or the plain subjects, and subscribing to other
// users' subjects, the request subjects and the services' inboxes; the
// trusted worker calls the plain subjects and is refused
// mcpbus.internal.> too.
func TestNATSPermissionsOnTheShippedCluster(t *testing.T) {
	pw := testPasswords(t)
	certs := testCerts(t)
	dir := t.TempDir()
	copyTree(t, "nats", dir)
	opts := natsOptions(t, dir, "nats-1", pw, certs)
	opts.Host, opts.Port, opts.HTTPPort, opts.HTTPSPort, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, 0, 0, true, true
	opts.Cluster.Port, opts.Cluster.Name, opts.Routes = 0, "", nil
	opts.StoreDir = filepath.Join(dir, "js")
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
	names := bus.Names{}.WithUserSubjects(true) // the default namespace accounts.conf is written for
	ca := nats.RootCAs(filepath.Join(certs, "ca.pem"))

	// Transport: no TLS, or TLS without the deployment CA, is refused.
	plain := strings.Replace(url, "tls://", "nats://", 1)
	if nc, err := nats.Connect(plain, nats.UserInfo(bus.ServiceAPI, pw[config.NATSServicePasswordVar(bus.ServiceAPI)]), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a plaintext client connected to the TLS-only client port")
	}
	if nc, err := nats.Connect(url, nats.UserInfo(bus.ServiceAPI, pw[config.NATSServicePasswordVar(bus.ServiceAPI)]), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a client that does not trust the deployment CA connected")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted CA: %v, want a certificate error", err)
	}

	// The services, each as its own user over TLS.
	svc := map[string]*testkit.NATSUser{}
	for _, name := range serviceUsers {
		svc[name] = testkit.ConnectNATSUser(t, url, name, pw[config.NATSServicePasswordVar(name)], names.ServiceInbox(name), ca)
		js, err := jetstream.New(svc[name].NC)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := bus.SetupFor(ctx, js, names, name, 1); err != nil {
			t.Fatalf("%s: JetStream setup: %v", name, err)
		}
		if name == bus.ServiceToolcall || name == bus.ServiceDiscovery {
			if _, err := bus.PresenceKV(ctx, js, names, 1); err != nil {
				t.Fatalf("%s: presence bucket: %v", name, err)
			}
		}
		cancel()
	}
	toolcall := svc[bus.ServiceToolcall]
	for _, subject := range []string{names.AnyUser(bus.VerbToolsCall), names.ToolsCall(), names.InternalCall()} {
		if _, err := toolcall.NC.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte("served " + m.Subject)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := toolcall.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	for caller, subject := range map[string]string{bus.ServiceTaskpoller: names.InternalCall(), bus.ServiceAPI: names.ToolsCall()} {
		if reply, err := svc[caller].NC.Request(subject, nil, 5*time.Second); err != nil || string(reply.Data) != "served "+subject {
			t.Fatalf("%s calling toolcall on %s: %v %v", caller, subject, reply, err)
		}
	}

	alice := testkit.ConnectNATSUser(t, url, "agent-alice", pw["MCPBUS_NATS_AGENT_ALICE_PASSWORD"], "_INBOX_alice", ca)
	own := names.User("alice", bus.VerbToolsCall)
	if reply, err := alice.NC.Request(own, nil, 5*time.Second); err != nil || string(reply.Data) != "served "+own {
		t.Fatalf("alice's worker on her own subject %s: %v %v", own, reply, err)
	}
	for _, subject := range []string{names.InternalCall(), names.InternalPersonal(), names.InternalToken(),
		names.User("bob", bus.VerbToolsCall), names.ToolsCall(), names.TasksList()} {
		if err := alice.NC.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		alice.Refused(t, "alice publishing "+subject, subject)
	}
	for _, subject := range []string{names.InternalPrefix() + ">", names.UserPrefix("bob") + ">", names.ToolsCall(),
		"_INBOX.>", "_INBOX_bob.>", names.ServiceInbox(bus.ServiceAPI) + ".>", "$KV." + names.ConfigBucket() + ".>"} {
		if _, err := alice.NC.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		alice.Refused(t, "alice subscribing to "+subject, subject)
	}

	trusted := testkit.ConnectNATSUser(t, url, "agent-trusted", pw["MCPBUS_NATS_AGENT_TRUSTED_PASSWORD"], "_INBOX_agent-trusted", ca)
	if reply, err := trusted.NC.Request(names.ToolsCall(), nil, 5*time.Second); err != nil || string(reply.Data) != "served "+names.ToolsCall() {
		t.Fatalf("the trusted worker on %s: %v %v", names.ToolsCall(), reply, err)
	}
	if err := trusted.NC.Publish(names.InternalCall(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	trusted.Refused(t, "the trusted worker publishing "+names.InternalCall(), names.InternalCall())

	if _, err := connectAs2(url, "agent-alice", "wrong", ca); err == nil {
		t.Error("agent-alice connected with a wrong password")
	}
}

func connectAs2(url, user, password string, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, append(opts, nats.UserInfo(user, password), nats.MaxReconnects(0))...)
	if err == nil {
		nc.Close()
	}
	return nc, err
}

// TestNATSClusterOfThreeServesReplicatedBuckets runs compose's three nodes
// from cluster.conf (ports moved to free loopback ones, each route
// pointing at the moved port of its node, TLS from certs.sh) and has discovery's user
// create the KV buckets and the events stream with the nats.replicas of
// deploy/config (3): the routes form one JetStream cluster that accepts
// them, and a stream's replicas land on three servers.
func TestNATSClusterOfThreeServesReplicatedBuckets(t *testing.T) {
	pw := testPasswords(t)
	certs := testCerts(t)
	replicas := int(loadSettings(t, filepath.Join("config", "config.yaml")).NATS.Replicas)
	routePorts := make([]int, len(natsNodes))
	for i := range routePorts {
		routePorts[i] = freePort(t)
	}
	var urls []string
	for i, node := range natsNodes {
		dir := t.TempDir()
		copyTree(t, "nats", dir)
		opts := natsOptions(t, dir, node, pw, certs)
		if len(opts.Routes) != len(natsNodes) {
			t.Fatalf("%s: %d routes", node, len(opts.Routes))
		}
		for j, r := range opts.Routes {
			k := slices.Index(natsNodes, r.Hostname())
			if k < 0 {
				t.Fatalf("%s: route to %s, not a node", node, r.Host)
			}
			moved := *r
			moved.Host = fmt.Sprintf("127.0.0.1:%d", routePorts[k])
			opts.Routes[j] = &moved
		}
		opts.Host, opts.Port, opts.HTTPPort, opts.HTTPSPort, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, 0, 0, true, true
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", routePorts[i]
		opts.StoreDir = filepath.Join(dir, "js")
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		srv.Start()
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatalf("%s not ready", node)
		}
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port))
	}
	svc := testkit.ConnectNATSUser(t, strings.Join(urls, ","), bus.ServiceDiscovery, pw[config.NATSServicePasswordVar(bus.ServiceDiscovery)],
		bus.Names{}.ServiceInbox(bus.ServiceDiscovery), nats.RootCAs(filepath.Join(certs, "ca.pem")))
	js, err := jetstream.New(svc.NC)
	if err != nil {
		t.Fatal(err)
	}
	names := bus.Names{}
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("the cluster to create the buckets and stream with %d replicas", replicas), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := bus.SetupFor(ctx, js, names, bus.ServiceDiscovery, replicas)
		return err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != replicas || info.Cluster == nil || info.Cluster.Name != "mcpbus" || len(info.Cluster.Replicas)+1 != replicas {
		t.Errorf("events stream: %d replicas, cluster %+v; want %d on the mcpbus cluster", info.Config.Replicas, info.Cluster, replicas)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
