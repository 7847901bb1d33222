package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSignatureDetectsChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "e.json", `{"a": 1}`)
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	sig, err := FileSignature(p)
	if err != nil {
		t.Fatal(err)
	}
	if sig.Path != p || sig.Size != 8 || !sig.ModTime.Equal(mtime) || len(sig.SHA256) != 64 {
		t.Fatalf("signature %+v", sig)
	}
	if changed, err := StatChanged(p, sig); err != nil || changed {
		t.Fatalf("unchanged file: changed=%v err=%v", changed, err)
	}
	again, _ := FileSignature(p)
	if !sig.Equal(again) {
		t.Fatal("Equal on identical file")
	}

	// Same size, same mtime, different content: only the hash sees it.
	if err := os.WriteFile(p, []byte(`{"a": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	edited, _ := FileSignature(p)
	if edited.Size != sig.Size || !edited.ModTime.Equal(sig.ModTime) {
		t.Fatal("test setup: size and mtime must match")
	}
	if sig.Equal(edited) {
		t.Fatal("Equal must compare content")
	}
	if changed, err := StatChanged(p, sig); err != nil || !changed {
		t.Fatalf("same-size same-mtime edit: changed=%v err=%v", changed, err)
	}

	// mtime-only change counts.
	later := mtime.Add(time.Second)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	if changed, _ := StatChanged(p, edited); !changed {
		t.Fatal("mtime change must count")
	}

	// Another path with the same content and stat counts.
	q := filepath.Join(dir, "other.json")
	if err := os.WriteFile(q, []byte(`{"a": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(q, later, later)
	cur, _ := FileSignature(p)
	if changed, _ := StatChanged(q, cur); !changed {
		t.Fatal("path change must count")
	}
	if !NewSignature(p, later, []byte(`{"a": 2}`)).Equal(cur) {
		t.Fatal("NewSignature of the same bytes must equal FileSignature")
	}

	// Deletion.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if changed, err := StatChanged(p, cur); err != nil || !changed {
		t.Fatalf("deleted file: changed=%v err=%v", changed, err)
	}
	if changed, _ := StatChanged(p, Signature{}); changed {
		t.Fatal("missing file vs zero signature is unchanged")
	}
	if _, err := FileSignature(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want ErrNotExist, got %v", err)
	}
}
