package main_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// spawnsByParent reads a file where every discovery of the recording stdio
// server appended its parent's pid (the discovery replica's), and counts
// the lines per pid.
func spawnsByParent(t *testing.T, path string) map[int]int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, line := range strings.Fields(string(raw)) {
		pid, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("spawn record %q: %v", line, err)
		}
		out[pid]++
	}
	return out
}

// TestDiscoveryReplicasFollowTheSharedGeneration runs discovery replicas as
// separate processes on one NATS server: a cache reset sent to one makes
// every replica re-discover, and a replica started after the reset works in
// the new generation.
func TestDiscoveryReplicasFollowTheSharedGeneration(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	dir := t.TempDir()
	spawns := filepath.Join(dir, "spawns")
	// sh records the pid of the replica that spawned it, then becomes the
	// demo server.
	b.PublishExtensions(t, fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": "sh",
		"args": ["-c", "echo $PPID >> %s; exec %s"]}}}`, spawns, demoBin))
	serve := func(name string) *process {
		return startProcess(t, dir, name, mcpbusBin, "serve", "discovery", "--nats-url", b.URL, "--namespace", b.Names.Namespace())
	}
	waitSpawns := func(what string, want map[int]int) {
		t.Helper()
		var got map[int]int
		defer func() {
			if t.Failed() {
				t.Logf("%s: discoveries per replica %v, want %v", what, got, want)
			}
		}()
		testkit.Eventually(t, 60*time.Second, what, func() bool { got = spawnsByParent(t, spawns); return maps.Equal(got, want) })
	}

	// Each replica warms its own cache once.
	ra, rb := serve("discovery-a"), serve("discovery-b")
	pa, pb := ra.cmd.Process.Pid, rb.cmd.Process.Pid
	waitSpawns("one discovery per replica", map[int]int{pa: 1, pb: 1})

	// A reset answered by one replica reaches both through the KV
	// generation: each re-discovers exactly once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := bus.Request[bus.CacheResetReply](ctx, b.NC, b.Names.CacheReset(), bus.CacheResetRequest{Reason: "replica test"})
	if err != nil || reply.Scope != "shared_config" || reply.Generation != 1 {
		t.Fatalf("reset: %+v, %v; want scope shared_config, generation 1", reply, err)
	}
	waitSpawns("both replicas re-discovered after the reset", map[int]int{pa: 2, pb: 2})

	// A replica started after the reset begins in the new generation.
	rc := serve("discovery-c")
	pc := rc.cmd.Process.Pid
	waitSpawns("the late replica discovered", map[int]int{pa: 2, pb: 2, pc: 1})
	ra.stop(t)
	rb.stop(t)
	var list bus.ToolsListReply
	testkit.Eventually(t, 30*time.Second, "the late replica answers alone", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err = bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.ToolsList(), bus.ToolsListRequest{})
		return err == nil
	})
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if list.Generation != 1 || !slices.Contains(names, "demo_echo") {
		t.Errorf("late replica: generation %d, tools %v; want generation 1 with demo_echo", list.Generation, names)
	}
	if got := spawnsByParent(t, spawns); !maps.Equal(got, map[int]int{pa: 2, pb: 2, pc: 1}) {
		t.Errorf("discoveries per replica = %v; the catalog request re-discovered", got)
	}
	rc.stop(t)
}
