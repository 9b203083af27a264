package idgen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A HighWaterStore keeps, across restarts, the instant before which a
// generator may have issued IDs, so that a generator restarted with its
// clock behind that instant does not issue them again. A generator saves
// a mark ahead of the clock (Config.Reserve) before issuing IDs up to it, and
// the exact mark when it is closed; it loads the mark on its first Next.
//
// A store serves one node's generator at a time. Leases of worker ids can
// carry the mark too.
type HighWaterStore interface {
	// Load returns the stored mark, or the zero Time if none was ever
	// saved.
	Load(ctx context.Context) (time.Time, error)
	// Save replaces the stored mark with t and returns once it would
	// survive a crash of the process or the machine.
	Save(ctx context.Context, t time.Time) error
}

// FileStore is a HighWaterStore in a local file holding the mark as decimal
// nanoseconds since the Unix epoch. Each save writes a temporary file
// beside it, syncs it and renames it over the old one, so a crash leaves
// either mark whole. Give every generator (every node) its own file.
type FileStore struct {
	path string
}

var _ HighWaterStore = (*FileStore)(nil)

// NewFileStore returns a store in the file at path; the file and its
// directory are created on the first save.
func NewFileStore(path string) *FileStore { return &FileStore{path: path} }

// Load reads the mark; a missing file means none.
func (s *FileStore) Load(context.Context) (time.Time, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("idgen: load high-water mark: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("idgen: load high-water mark from %s: not a non-negative integer: %q", s.path, b)
	}
	return time.Unix(0, n), nil
}

// Save writes the mark.
func (s *FileStore) Save(_ context.Context, t time.Time) error {
	if err := s.save(t); err != nil {
		return fmt.Errorf("idgen: save high-water mark: %w", err)
	}
	return nil
}

func (s *FileStore) save(t time.Time) error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(s.path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	_, err = f.WriteString(strconv.FormatInt(t.UnixNano(), 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), s.path); err != nil {
		return err
	}
	// The rename is durable only once the directory is synced.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
