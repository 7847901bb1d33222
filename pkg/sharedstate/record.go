package sharedstate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// ConfigRecord is the value of the KV key "config": the raw file (never
// expanded: $VAR values are resolved by each service in its own environment)
// and its signature.
type ConfigRecord struct {
	Path      string           `json:"path"`
	Signature config.Signature `json:"signature"`
	Raw       []byte           `json:"raw"`
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
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode config record: %w", err)
	}
	if _, err := kv.Put(ctx, bus.KVKeyConfig, data); err != nil {
		return fmt.Errorf("publish config to kv: %w", err)
	}
	return nil
}
