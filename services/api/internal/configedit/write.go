package configedit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// DefaultConfigFileMode is the mode of a config file that WriteFileAtomic
// creates.
const DefaultConfigFileMode fs.FileMode = 0o600

// fileEditMu serialises every read-modify-write of a config file in this
// process (EditFile).
var fileEditMu sync.Mutex

// testHookBeforeRename, when set (tests only), runs after the temporary file
// is written and synced and before the rename; an error aborts the write.
var testHookBeforeRename func(tmp string) error

// EditFile runs one read-modify-write of the file at path under a
// process-wide lock: edit gets the current bytes (exists is false for a
// missing file) and returns the new bytes, which are written with
// WriteFileAtomic. An error from edit writes nothing and is returned as is.
// Concurrent EditFile calls never lose each other's changes.
func EditFile(path string, edit func(current []byte, exists bool) ([]byte, error)) error {
	return EditFileCommit(path, edit, nil)
}

// EditFileCommit is EditFile followed, still under the lock, by commit
// (nil: none), which makes the written file take effect (publishes it).
// When commit fails the file is put back as it was (removed when it did
// not exist) and commit's error is returned: the file never keeps a change
// that did not take effect.
func EditFileCommit(path string, edit func(current []byte, exists bool) ([]byte, error), commit func() error) error {
	fileEditMu.Lock()
	defer fileEditMu.Unlock()
	target, err := resolveSymlinks(path)
	if err != nil {
		return err
	}
	cur, err := os.ReadFile(target)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	next, err := edit(cur, exists)
	if err != nil {
		return err
	}
	if err := writeAtomic(target, next); err != nil {
		return &WriteError{Path: path, Err: err}
	}
	if commit == nil {
		return nil
	}
	cerr := commit()
	if cerr == nil {
		return nil
	}
	if exists {
		err = writeAtomic(target, cur)
	} else {
		err = os.Remove(target)
	}
	if err != nil {
		return errors.Join(cerr, fmt.Errorf("restore %s after the failed commit: %w", path, err))
	}
	return cerr
}

// WriteError is a config file that could not be written (a read-only
// file system or file, a full disk); nothing changed.
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string { return "cannot write " + e.Path + ": " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Writable reports why the config file at path cannot be replaced by
// EditFile ("" when it can): EditFile writes a temporary file next to the
// target and renames it, so the directory must be writable, and an
// existing file must be writable too (a read-only file is a deliberate
// marker, as a Kubernetes ConfigMap mount is).
func Writable(path string) string {
	target, err := resolveSymlinks(path)
	if err != nil {
		return err.Error()
	}
	if info, err := os.Stat(target); err == nil && info.Mode().Perm()&0o200 == 0 {
		return "the file is read-only"
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".probe-*")
	if err != nil {
		return "its directory is not writable: " + err.Error()
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return ""
}

// WriteFileAtomic replaces the file at path with data so that readers (and
// a crash at any point) see either the old or the new content, never a mix:
// it writes a temporary file in the same directory, syncs it, renames it
// over the target and syncs the directory. A symlink at path is followed and
// its target replaced (the link stays). An existing file keeps its
// permission bits; a new one gets DefaultConfigFileMode.
func WriteFileAtomic(path string, data []byte) error {
	target, err := resolveSymlinks(path)
	if err != nil {
		return err
	}
	return writeAtomic(target, data)
}

func writeAtomic(target string, data []byte) (err error) {
	mode := DefaultConfigFileMode
	if info, serr := os.Stat(target); serr == nil {
		mode = info.Mode().Perm()
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return fmt.Errorf("stat %s: %w", target, serr)
	}
	dir := filepath.Dir(target)
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create temporary file: %w", target, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: chmod temporary file: %w", target, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", target, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", target, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", target, err)
	}
	if testHookBeforeRename != nil {
		if err = testHookBeforeRename(tmp); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp, target); err != nil {
		return fmt.Errorf("write %s: rename: %w", target, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		serr := d.Sync()
		_ = d.Close()
		if serr != nil {
			return fmt.Errorf("write %s: sync directory: %w", target, serr)
		}
	}
	return nil
}

// resolveSymlinks follows symlinks at path (relative links resolve against
// their directory) to the file to replace; the final target may not exist.
func resolveSymlinks(path string) (string, error) {
	cur := path
	for range 40 {
		info, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return cur, nil
		}
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", cur, err)
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			return cur, nil
		}
		link, err := os.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("read symlink %s: %w", cur, err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(cur), link)
		}
		cur = link
	}
	return "", fmt.Errorf("resolve %s: too many levels of symbolic links", path)
}
