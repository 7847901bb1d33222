package launchpolicy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// uidClaimsDir holds one file per uid given to a user, under
// <workspace.root>/personal: the file <uid> holds the user's digest.
const uidClaimsDir = ".uids"

// uidMap gives each user a uid of personal_connections.uid_range that no
// other user has: the user's digest picks a start in the range and the
// first uid from there that is free or already the user's is claimed by a
// file made with link(2), which fails when another process claimed it
// first. Claims persist, so a user keeps the uid across restarts and
// across the services sharing the workspace root (toolcall and discovery).
// Safe for concurrent use.
type uidMap struct {
	r    config.UIDRange
	dir  string // the claims directory, maybe relative
	mu   sync.Mutex
	seen map[string]uint32 // by user
}

func newUIDMap(r config.UIDRange, dir string) *uidMap {
	return &uidMap{r: r, dir: dir, seen: map[string]uint32{}}
}

// uid returns user's uid, claiming one on first use.
func (m *uidMap) uid(user string) (uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if uid, ok := m.seen[user]; ok {
		return uid, nil
	}
	dir, err := filepath.Abs(m.dir)
	if err != nil {
		return 0, fmt.Errorf("cannot resolve workspace.root: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("cannot create the uid claims directory: %w", err)
	}
	sum := sha256.Sum256([]byte("mcpbus personal uid\x00" + user))
	digest := hex.EncodeToString(sum[:])
	start := binary.BigEndian.Uint64(sum[:8]) % uint64(m.r.Count)
	for i := int64(0); i < m.r.Count; i++ {
		uid := m.r.First + int64((start+uint64(i))%uint64(m.r.Count))
		ok, err := claim(filepath.Join(dir, strconv.FormatInt(uid, 10)), digest)
		if err != nil {
			return 0, err
		}
		if ok {
			m.seen[user] = uint32(uid)
			return uint32(uid), nil
		}
	}
	return 0, fmt.Errorf("no free uid left in personal_connections.uid_range (%d from %d): widen it", m.r.Count, m.r.First)
}

// claim reports whether the claim file at path is digest's, making it so
// when there is none. The content is written to a private temporary file
// first and linked into place, so a claim is never seen half-written.
func claim(path, digest string) (bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return string(b) == digest, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cannot read a uid claim: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".claim-*")
	if err != nil {
		return false, fmt.Errorf("cannot claim a uid: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, werr := tmp.WriteString(digest)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return false, fmt.Errorf("cannot claim a uid: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			b, err := os.ReadFile(path)
			return err == nil && string(b) == digest, nil
		}
		return false, fmt.Errorf("cannot claim a uid: %w", err)
	}
	return true, nil
}

// giveTree gives dir and, when dir belonged to another uid, everything in
// it to uid and gid, so a workspace moved to a new uid is whole; otherwise
// dir and also (made since) only. Symbolic links are changed themselves,
// never followed.
func giveTree(dir string, uid, gid int, also ...string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if owner, ok := ownerOf(fi); ok && owner == uid {
		for _, d := range append([]string{dir}, also...) {
			if err := os.Lchown(d, uid, gid); err != nil {
				return err
			}
		}
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}
