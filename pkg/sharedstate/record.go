package sharedstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// ConfigRecord is the value of the KV key "config": the raw file (never
// expanded: $VAR values are resolved by each service in its own environment)
// and its signature, plus what the drift guard for durable task servers
// judges it against.
//
// A file owner's first publication after it starts is its startup
// publication (Startup set): the deployment's restart point, and the
// baseline every service judges later publications against. Each later
// publication of the same running owner carries that baseline (Baseline),
// so every replica, whenever it started, judges it against the same file.
// A record with neither (written by an older publisher or by hand) is
// judged against the baseline the reader already holds.
type ConfigRecord struct {
	Path      string           `json:"path"`
	Signature config.Signature `json:"signature"`
	Raw       []byte           `json:"raw"`
	Startup   bool             `json:"startup,omitempty"`
	Baseline  *BaselineRecord  `json:"baseline,omitempty"`
}

// BaselineRecord is the startup publication a later publication is judged
// against: its KV revision (the config epoch: KV revisions only grow) and
// its raw file.
type BaselineRecord struct {
	Epoch uint64 `json:"epoch"`
	Path  string `json:"path"`
	Raw   []byte `json:"raw"`
}

// Parse turns the record into Extensions.
func (r ConfigRecord) Parse() (*config.Extensions, error) {
	return config.ParseExtensions(r.Path, r.Raw)
}

// ReadFileRecord reads the config file and its signature. The file must
// parse: a broken file is never published.
func ReadFileRecord(path string) (ConfigRecord, error) {
	sig, err := config.FileSignature(path)
	if err != nil {
		return ConfigRecord{}, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return ConfigRecord{}, fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := config.ParseExtensions(path, raw); err != nil {
		return ConfigRecord{}, err
	}
	return ConfigRecord{Path: path, Signature: sig, Raw: raw}, nil
}

// PublishConfig writes rec to the KV key "config".
func PublishConfig(ctx context.Context, kv jetstream.KeyValue, rec ConfigRecord) error {
	_, err := putConfig(ctx, kv, rec)
	return err
}

// putConfig writes rec to the KV key "config" and returns its revision.
func putConfig(ctx context.Context, kv jetstream.KeyValue, rec ConfigRecord) (uint64, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode config record: %w", err)
	}
	rev, err := kv.Put(ctx, bus.KVKeyConfig, data)
	if err != nil {
		return 0, fmt.Errorf("publish config to kv: %w", err)
	}
	return rev, nil
}

// CurrentBaseline returns the deployment's baseline as the KV bucket holds
// it: the record under "config" itself when it is a startup publication,
// else the baseline it carries; nil when there is no record or it carries
// none.
func CurrentBaseline(ctx context.Context, kv jetstream.KeyValue) (*BaselineRecord, error) {
	e, err := kv.Get(ctx, bus.KVKeyConfig)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config from kv: %w", err)
	}
	var rec ConfigRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("decode config record: %w", err)
	}
	switch {
	case rec.Startup:
		return &BaselineRecord{Epoch: e.Revision(), Path: rec.Path, Raw: rec.Raw}, nil
	default:
		return rec.Baseline, nil
	}
}
