package crypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// KeySize is the length of a credentials key in bytes (AES-256).
const KeySize = 32

const version byte = 0x01

// ErrOpen is returned by Open when a ciphertext does not open under this key
// (another key sealed it, it was altered, or the additional data differs).
var ErrOpen = errors.New("crypto: ciphertext does not open with this credentials key")

// ErrNoKey is returned by FromEnv when neither variable is set.
var ErrNoKey = errors.New("crypto: no credentials key: set " + config.EnvCredentialsKey + " (or " + config.EnvDeerFlowCredentialsKey + "); `mcpbus keygen` prints one")

// Sealer seals and opens with one key.
type Sealer struct {
	aead cipher.AEAD
}

// ParseKey decodes a key written as 64 hex digits or as base64 (standard or
// URL alphabet, padded or not) of 32 bytes. The error never contains the
// key.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) == KeySize {
				return b, nil
			}
			return nil, fmt.Errorf("crypto: the credentials key decodes to %d bytes, want %d (64 hex digits or base64 of 32 bytes; `mcpbus keygen` prints one)", len(b), KeySize)
		}
	}
	return nil, fmt.Errorf("crypto: the credentials key is neither 64 hex digits nor base64 of %d bytes (`mcpbus keygen` prints one)", KeySize)
}

// New returns a Sealer for a key in the text form ParseKey accepts.
func New(key string) (*Sealer, error) {
	b, err := ParseKey(key)
	if err != nil {
		return nil, err
	}
	return NewFromBytes(b)
}

// NewFromBytes returns a Sealer for a raw 32-byte key.
func NewFromBytes(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("crypto: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("crypto: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("crypto: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// FromEnv returns a Sealer for env.CredentialsKey() ($MCPBUS_CREDENTIALS_KEY,
// else $DEER_FLOW_CREDENTIALS_KEY). It returns ErrNoKey when neither is set
// and a descriptive error (without the key) when the value is malformed.
func FromEnv(env config.Env) (*Sealer, error) {
	k := env.CredentialsKey()
	if k == "" {
		return nil, ErrNoKey
	}
	return New(k)
}

// NewKey returns a new random key in standard padded base64.
func NewKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("crypto: random key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Seal encrypts plaintext bound to additional data ad.
func (s *Sealer) Seal(plaintext, ad []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("crypto: nonce: %w", err)
	}
	out := make([]byte, 0, 1+len(nonce)+len(plaintext)+s.aead.Overhead())
	out = append(out, version)
	out = append(out, nonce...)
	return s.aead.Seal(out, nonce, plaintext, ad), nil
}

// Open decrypts what Seal returned for the same additional data, or returns
// ErrOpen.
func (s *Sealer) Open(ciphertext, ad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(ciphertext) < 1+n+s.aead.Overhead() || ciphertext[0] != version {
		return nil, ErrOpen
	}
	pt, err := s.aead.Open(nil, ciphertext[1:1+n], ciphertext[1+n:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
