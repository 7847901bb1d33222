package sharedstate_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func startWatcher(t *testing.T, b *testkit.Bus) *sharedstate.Watcher {
	t.Helper()
	w := sharedstate.NewWatcher(b.KV, nil, observability.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done, err := w.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func TestLateWatcherSeesCurrentConfigAndGeneration(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, `{"mcpServers": {"a": {"command": "x"}}}`)
	for range 3 {
		if _, err := bus.BumpGeneration(context.Background(), b.KV); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatcher(t, b) // started after the reset: must see it at once
	snap := w.Current()
	if snap.Generation != 3 {
		t.Errorf("generation = %d, want 3", snap.Generation)
	}
	if snap.Extensions.Server("a") == nil {
		t.Errorf("config not applied at start: %+v", snap.Extensions)
	}
}

func TestWatcherFollowsChangesAndKeepsLastGoodConfig(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, `{"mcpServers": {"a": {"command": "x"}}}`)
	w := startWatcher(t, b)
	var mu sync.Mutex
	var gens []int64
	w.OnChange(func(prev, next sharedstate.Snapshot) {
		mu.Lock()
		gens = append(gens, next.Generation)
		mu.Unlock()
	})
	b.PublishExtensions(t, `{"mcpServers": {"b": {"command": "y"}}}`)
	testkit.Eventually(t, 5*time.Second, "new config", func() bool { return w.Current().Extensions.Server("b") != nil })

	// A record that does not parse never replaces the config in force.
	if _, err := b.KV.Put(context.Background(), bus.KVKeyConfig, []byte(`{"path":"x","raw":"bm90IGpzb24="}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.BumpGeneration(context.Background(), b.KV); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "generation 1", func() bool { return w.Current().Generation == 1 })
	if w.Current().Extensions.Server("b") == nil {
		t.Error("a broken record replaced the last good config")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gens) == 0 || gens[len(gens)-1] != 1 {
		t.Errorf("listener saw generations %v", gens)
	}
}

func TestFilePublisherPublishesOnlyChanges(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}
	ctx := context.Background()
	if ok, err := p.PublishNow(ctx, true); !ok || err != nil {
		t.Fatalf("first publish: %v %v", ok, err)
	}
	if ok, err := p.PublishNow(ctx, false); ok || err != nil {
		t.Fatalf("unchanged file published again: %v %v", ok, err)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.PublishNow(ctx, false); ok || err == nil {
		t.Fatalf("broken file published: %v %v", ok, err)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"c": {"command": "z"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.PublishNow(ctx, false); !ok || err != nil {
		t.Fatalf("edited file not published: %v %v", ok, err)
	}
}

func TestPublishIfStatChangedIsCheapAndCatchesResizedFiles(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}
	ctx := context.Background()
	if ok, err := p.PublishIfStatChanged(ctx); ok || err != nil {
		t.Fatalf("published before the first full publication: %v %v", ok, err)
	}
	if _, err := p.PublishNow(ctx, true); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.PublishIfStatChanged(ctx); ok || err != nil {
		t.Fatalf("unchanged file published: %v %v", ok, err)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"d": {"command": "z"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.PublishIfStatChanged(ctx); !ok || err != nil {
		t.Fatalf("resized file not published: %v %v", ok, err)
	}
}

func TestFilePublisherMarksItsStartupAndCarriesItAsTheBaseline(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startWatcher(t, b)
	p := &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}
	ctx := context.Background()
	if _, err := p.PublishNow(ctx, true); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the startup publication", func() bool { return w.Current().Extensions.Server("a") != nil })
	start := w.Current()
	if start.Baseline != start.Extensions || start.BaselineEpoch == 0 {
		t.Fatalf("startup publication: baseline %p (epoch %d), config %p; want the config itself", start.Baseline, start.BaselineEpoch, start.Extensions)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"b": {"command": "y"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishNow(ctx, true); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the later publication", func() bool { return w.Current().Extensions.Server("b") != nil })
	later := w.Current()
	if later.Baseline == nil || later.Baseline.Server("a") == nil || later.BaselineEpoch != start.BaselineEpoch {
		t.Errorf("later publication: baseline %+v epoch %d; want the startup file, epoch %d", later.Baseline, later.BaselineEpoch, start.BaselineEpoch)
	}
	// A new publisher (the api restarted) makes a new startup publication.
	p2 := &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}
	if _, err := p2.PublishNow(ctx, true); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the restart's publication", func() bool { return w.Current().BaselineEpoch > start.BaselineEpoch })
	if cur := w.Current(); cur.Baseline != cur.Extensions {
		t.Errorf("restart: baseline is not the published config")
	}
}

// TestTwoFileOwnersShareOneBaseline: with two api replicas, a later
// publication of the replica that started first carries the newest startup
// publication (the other replica's), so the baseline never flips back.
func TestTwoFileOwnersShareOneBaseline(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}
	second := &sharedstate.FilePublisher{KV: b.KV, Path: path, Log: observability.Discard()}
	for _, p := range []*sharedstate.FilePublisher{first, second} {
		if _, err := p.PublishNow(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	newest, err := sharedstate.CurrentBaseline(ctx, b.KV)
	if err != nil || newest == nil {
		t.Fatalf("baseline after both starts: %v %v", newest, err)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"b": {"command": "y"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := first.PublishNow(ctx, true); err != nil {
		t.Fatal(err)
	}
	got, err := sharedstate.CurrentBaseline(ctx, b.KV)
	if err != nil || got == nil || got.Epoch != newest.Epoch {
		t.Fatalf("the first replica's edit carries baseline %+v (%v); want the second replica's startup, epoch %d", got, err, newest.Epoch)
	}
}
