package config

import (
	"strings"
	"testing"
)

func TestNATSReplicasReadsAutoOrACount(t *testing.T) {
	clearSettingsEnv(t)
	dir := t.TempDir()
	for content, want := range map[string]Replicas{
		"log:\n  level: info\n":     ReplicasAuto, // the default
		"nats:\n  replicas: auto\n": ReplicasAuto,
		"nats:\n  replicas: 3\n":    3,
		"nats:\n  replicas: 1\n":    1,
	} {
		s, err := LoadSettings(writeFile(t, dir, "config.yaml", content), true, ReadEnv())
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		if s.NATS.Replicas != want {
			t.Errorf("%q: replicas %s, want %s", content, s.NATS.Replicas, want)
		}
	}
	for _, content := range []string{"nats:\n  replicas: 0\n", "nats:\n  replicas: three\n", "nats:\n  replicas: 9\n"} {
		_, err := LoadSettings(writeFile(t, dir, "config.yaml", content), true, ReadEnv())
		if err == nil || !strings.Contains(err.Error(), "nats.replicas") || !strings.Contains(err.Error(), "auto or 1 to 5") {
			t.Errorf("%q: %v, want an error naming nats.replicas", content, err)
		}
	}
}

func TestNATSURLSetTellsTheFileFromTheDefault(t *testing.T) {
	clearSettingsEnv(t)
	dir := t.TempDir()
	for content, want := range map[string]bool{
		"log:\n  level: info\n":                 false,
		"nats:\n  url: nats://bus:4222\n":       true,
		"nats:\n  url: nats://127.0.0.1:4222\n": true,
	} {
		s, err := LoadSettings(writeFile(t, dir, "config.yaml", content), true, ReadEnv())
		if err != nil {
			t.Fatal(err)
		}
		if s.NATS.URLSet != want || s.NATS.URL == "" {
			t.Errorf("%q: url %q set %v, want set %v", content, s.NATS.URL, s.NATS.URLSet, want)
		}
	}
}
