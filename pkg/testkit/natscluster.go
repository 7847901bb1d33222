package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// NATSServerBin is the nats-server binary StartNATSCluster runs
// ($MCPBUS_TEST_NATS_SERVER, default nats-server on the PATH).
var NATSServerBin = func() string {
	if v := os.Getenv("MCPBUS_TEST_NATS_SERVER"); v != "" {
		return v
	}
	return "nats-server"
}()

// NATSCluster is nats-server processes with JetStream forming one cluster
// on loopback ports, for tests of replication and failover.
type NATSCluster struct {
	// URL lists every node's client URL, comma separated (a client fails
	// over to the others).
	URL   string
	Nodes []*NATSNode
}

// NATSNode is one server of a NATSCluster.
type NATSNode struct {
	// Name is its server_name (n1, n2, …), as JetStream names a leader.
	Name string
	URL  string
	conf string
	cmd  *exec.Cmd
	out  *SyncBuffer
}

// StartNATSCluster starts n nats-server processes in one cluster and waits
// until JetStream answers and every node is known to a client. The
// processes are killed when the test ends.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	dir := t.TempDir()
	clientPorts, routePorts := make([]int, n), make([]int, n)
	routes := make([]string, n)
	for i := range n {
		for _, p := range []*int{&clientPorts[i], &routePorts[i]} {
			port, err := FreePort()
			if err != nil {
				t.Fatal(err)
			}
			*p = port
		}
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", routePorts[i])
	}
	c := &NATSCluster{}
	urls := make([]string, n)
	for i := range n {
		node := &NATSNode{Name: fmt.Sprintf("n%d", i+1), URL: fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]), out: &SyncBuffer{}}
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nmax_payload: 8MB\njetstream { store_dir: %q }\ncluster { name: testcluster\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n",
			node.Name, clientPorts[i], filepath.Join(dir, node.Name), routePorts[i], strings.Join(routes, ", "))
		confPath := filepath.Join(dir, node.Name+".conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		node.conf = confPath
		node.Start(t)
		t.Cleanup(func() { node.Kill() })
		c.Nodes, urls[i] = append(c.Nodes, node), node.URL
	}
	c.URL = strings.Join(urls, ",")
	t.Cleanup(func() {
		if t.Failed() {
			for _, node := range c.Nodes {
				t.Logf("--- nats-server %s ---\n%s", node.Name, node.out.String())
			}
		}
	})
	Eventually(t, 60*time.Second, "the NATS cluster to form with JetStream", func() bool {
		nc, err := nats.Connect(c.URL)
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil || bus.ClusterSize(nc) != n {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil
	})
	return c
}

// Node returns the node named name (a JetStream leader's name).
func (c *NATSCluster) Node(t testing.TB, name string) *NATSNode {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no NATS node %q", name)
	return nil
}

// Start starts the node's nats-server (again, after Kill: same ports,
// same store); it does not wait for it to serve.
func (n *NATSNode) Start(t testing.TB) {
	t.Helper()
	n.cmd = exec.Command(NATSServerBin, "-c", n.conf)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start nats-server %s: %v", n.Name, err)
	}
}

// Kill ends the node with SIGKILL (a crash) and waits for it.
func (n *NATSNode) Kill() {
	if n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
	}
}
