package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// Signature identifies one version of a config file: path, modification
// time, size and content hash all count.
type Signature struct {
	Path    string    `json:"path"`
	ModTime time.Time `json:"mod_time"`
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256"`
}

// FileSignature stats and hashes the file at path. A missing file is an
// error wrapping fs.ErrNotExist.
func FileSignature(path string) (Signature, error) {
	f, err := os.Open(path)
	if err != nil {
		return Signature{}, fmt.Errorf("signature of %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Signature{}, fmt.Errorf("signature of %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Signature{}, fmt.Errorf("signature of %s: read: %w", path, err)
	}
	return Signature{Path: path, ModTime: info.ModTime(), Size: info.Size(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// NewSignature builds the signature of bytes already read from path (so a
// caller that reads once signs exactly what it parsed). Size is len(data).
func NewSignature(path string, modTime time.Time, data []byte) Signature {
	return Signature{Path: path, ModTime: modTime, Size: int64(len(data)), SHA256: sha256Hex(data)}
}

// Equal reports whether both signatures have the same path, modification
// time, size and content hash.
func (s Signature) Equal(o Signature) bool {
	return s.Path == o.Path && s.ModTime.Equal(o.ModTime) && s.Size == o.Size && s.SHA256 == o.SHA256
}

// IsZero reports whether s describes no file.
func (s Signature) IsZero() bool { return s == Signature{} }

// StatChanged reports whether the file at path differs from prev. A
// different path, mtime or size is a change without reading the file; when
// they all match the content is hashed, so a same-size edit that kept its
// mtime is still seen. A missing file counts as changed unless prev is zero.
func StatChanged(path string, prev Signature) (bool, error) {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return !prev.IsZero(), nil
		}
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if path != prev.Path || !info.ModTime().Equal(prev.ModTime) || info.Size() != prev.Size {
		return true, nil
	}
	cur, err := FileSignature(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		return false, err
	}
	return cur.SHA256 != prev.SHA256, nil
}
