package crypto_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
)

func TestSealOpenRoundTripAndBinding(t *testing.T) {
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := crypto.New(key)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("rt-very-secret")
	ct, err := s.Seal(secret, []byte("row-a/refresh"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, secret) {
		t.Fatal("ciphertext contains the plaintext")
	}
	got, err := s.Open(ct, []byte("row-a/refresh"))
	if err != nil || string(got) != string(secret) {
		t.Fatalf("open = %q, %v", got, err)
	}
	ct2, _ := s.Seal(secret, []byte("row-a/refresh"))
	if bytes.Equal(ct, ct2) {
		t.Fatal("two seals of the same plaintext are equal (nonce reuse)")
	}
	if _, err := s.Open(ct, []byte("row-b/refresh")); !errors.Is(err, crypto.ErrOpen) {
		t.Fatalf("open with other additional data: %v, want ErrOpen", err)
	}
	other, _ := crypto.NewKey()
	s2, _ := crypto.New(other)
	if _, err := s2.Open(ct, []byte("row-a/refresh")); !errors.Is(err, crypto.ErrOpen) {
		t.Fatalf("open with another key: %v, want ErrOpen", err)
	}
	ct[len(ct)-1] ^= 1
	if _, err := s.Open(ct, []byte("row-a/refresh")); !errors.Is(err, crypto.ErrOpen) {
		t.Fatalf("open of altered ciphertext: %v, want ErrOpen", err)
	}
	if _, err := s.Open([]byte{1, 2}, nil); !errors.Is(err, crypto.ErrOpen) {
		t.Fatalf("open of short input: %v", err)
	}
}

func TestParseKeyForms(t *testing.T) {
	raw := bytes.Repeat([]byte{0xfb}, 32)
	for name, form := range map[string]string{
		"hex":        hex.EncodeToString(raw),
		"std":        base64.StdEncoding.EncodeToString(raw),
		"url":        base64.URLEncoding.EncodeToString(raw),
		"raw url":    base64.RawURLEncoding.EncodeToString(raw),
		"raw std":    base64.RawStdEncoding.EncodeToString(raw),
		"whitespace": " " + hex.EncodeToString(raw) + "\n",
	} {
		b, err := crypto.ParseKey(form)
		if err != nil || !bytes.Equal(b, raw) {
			t.Errorf("%s: %x, %v", name, b, err)
		}
	}
	for name, bad := range map[string]string{
		"short":   base64.StdEncoding.EncodeToString(raw[:16]),
		"garbage": "not a key at all!",
	} {
		_, err := crypto.ParseKey(bad)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), bad) {
			t.Errorf("%s: error echoes the key: %v", name, err)
		}
	}
}

func TestFromEnvAndAlias(t *testing.T) {
	t.Setenv(config.EnvCredentialsKey, "")
	t.Setenv(config.EnvDeerFlowCredentialsKey, "")
	if _, err := crypto.FromEnv(config.ReadEnv()); !errors.Is(err, crypto.ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
	k1, _ := crypto.NewKey()
	t.Setenv(config.EnvDeerFlowCredentialsKey, k1)
	s1, err := crypto.FromEnv(config.ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := s1.Seal([]byte("x"), nil)
	k2, _ := crypto.NewKey()
	t.Setenv(config.EnvCredentialsKey, k2) // MCPBUS_ wins over the alias
	s2, err := crypto.FromEnv(config.ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Open(ct, nil); !errors.Is(err, crypto.ErrOpen) {
		t.Fatal("MCPBUS_CREDENTIALS_KEY did not take precedence")
	}
	t.Setenv(config.EnvCredentialsKey, "bad")
	if _, err := crypto.FromEnv(config.ReadEnv()); err == nil || errors.Is(err, crypto.ErrNoKey) {
		t.Fatalf("malformed key: %v", err)
	}
}
