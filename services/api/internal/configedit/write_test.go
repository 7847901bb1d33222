package configedit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TestWriteFailureKeepsOldFile runs first (not parallel: it sets the
// package's test hook) and makes the write fail after the temporary file is
// complete: the old file is untouched and no temporary file is left.
func TestWriteFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "ext.json", `{"old": true}`)
	testHookBeforeRename = func(string) error { return errors.New("disk on fire") }
	defer func() { testHookBeforeRename = nil }()
	err := EditFile(path, func([]byte, bool) ([]byte, error) { return []byte(`{"new": true}`), nil })
	if err == nil {
		t.Fatal("the write succeeded")
	}
	if got, _ := os.ReadFile(path); string(got) != `{"old": true}` {
		t.Fatalf("file = %s", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestWriteFileAtomicKeepsModeAndFollowsSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "ext.json", `{}`)
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte(`{"a": 1}`)); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if got, _ := os.ReadFile(path); string(got) != `{"a": 1}` || info.Mode().Perm() != 0o640 {
		t.Fatalf("content %s mode %v", got, info.Mode().Perm())
	}

	// A relative symlink chain: the final target is replaced, the links stay.
	real := filepath.Join(dir, "data", "real.json")
	_ = os.MkdirAll(filepath.Dir(real), 0o755)
	if err := os.WriteFile(real, []byte(`{}`), 0o604); err != nil {
		t.Fatal(err)
	}
	mid := filepath.Join(dir, "mid.json")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("data/real.json", mid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mid, link); err != nil {
		t.Fatal(err)
	}
	if err := EditFile(link, func(cur []byte, exists bool) ([]byte, error) {
		if !exists || string(cur) != `{}` {
			return nil, fmt.Errorf("current = %q, %v", cur, exists)
		}
		return []byte(`{"b": 2}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{link, mid} {
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is no longer a symlink", l)
		}
	}
	info, _ = os.Stat(real)
	if got, _ := os.ReadFile(real); string(got) != `{"b": 2}` || info.Mode().Perm() != 0o604 {
		t.Fatalf("target content %s mode %v", got, info.Mode().Perm())
	}

	// A missing file is created with the default mode.
	fresh := filepath.Join(dir, "fresh.json")
	if err := EditFile(fresh, func(cur []byte, exists bool) ([]byte, error) {
		if exists {
			return nil, errors.New("exists")
		}
		return []byte(`{}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(fresh); err != nil || info.Mode().Perm() != DefaultConfigFileMode {
		t.Fatalf("new file: %v %v", info, err)
	}
}

// TestEditFileSerialises runs concurrent read-modify-writes: none is lost.
func TestEditFileSerialises(t *testing.T) {
	t.Parallel()
	path := writeFile(t, t.TempDir(), "n", "0")
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			err := EditFile(path, func(cur []byte, _ bool) ([]byte, error) {
				n, err := strconv.Atoi(string(cur))
				return []byte(strconv.Itoa(n + 1)), err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := os.ReadFile(path); string(got) != "20" {
		t.Fatalf("counter = %s, want 20", got)
	}
}

const writerHelperEnv = "MCPBUS_ATOMIC_WRITER_PATH"

// versions are two large contents the helper alternates between.
func versions() [2][]byte {
	return [2][]byte{
		[]byte(`{"v": "` + string(bytes.Repeat([]byte("a"), 4<<20)) + `"}`),
		[]byte(`{"v": "` + string(bytes.Repeat([]byte("b"), 4<<20)) + `"}`),
	}
}

// TestAtomicWriterHelper is the child process of TestAtomicWriteSurvivesKill:
// it rewrites the file forever, printing a line after each write.
func TestAtomicWriterHelper(t *testing.T) {
	path := os.Getenv(writerHelperEnv)
	if path == "" {
		return // not the helper: nothing to do
	}
	v := versions()
	for i := 0; ; i++ {
		if err := WriteFileAtomic(path, v[i%2]); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("wrote", i)
	}
}

// TestAtomicWriteSurvivesKill kills a process that rewrites the file in a
// loop, at several points, and finds the old or the new file every time,
// never a broken one.
func TestAtomicWriteSurvivesKill(t *testing.T) {
	t.Parallel()
	v := versions()
	for round := range 5 {
		dir := t.TempDir()
		path := filepath.Join(dir, "ext.json")
		if err := os.WriteFile(path, v[1], 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestAtomicWriterHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), writerHelperEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		for i := 0; i <= round; i++ {
			if !lines.Scan() {
				t.Fatalf("the writer stopped: %v", lines.Err())
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
		}
		_ = cmd.Wait()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v[0]) && !bytes.Equal(got, v[1]) {
			t.Fatalf("round %d: the file is broken (%d bytes)", round, len(got))
		}
		info, _ := os.Stat(path)
		if info.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", info.Mode().Perm())
		}
	}
}
