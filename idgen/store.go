package idgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// either mark whole.
//
// A FileStore holds its file for one generator, from OpenFileStore until
// Close, through a lock file beside it (the path with ".lock" appended). Another store given the same path, in this process
// or another, fails with [ErrInvalidConfig] instead of sharing a mark that
// each would overwrite while their generators issue the same IDs. Give every
// generator (every node) its own file. A FileStore must be closed when its
// generator is done with it (after the Generator's Close, which saves the
// last mark): until then no other store can take the file. On Linux, macOS,
// the BSDs and illumos the lock is flock(2) on the lock file, which stays;
// the kernel releases the lock however the process ends. Elsewhere the lock
// file itself is the lock, created exclusively and removed by Close: a crash
// leaves it behind, and the error names it for removal once its process is
// gone.
//
// A FileStore is safe for concurrent use.
type FileStore struct {
	path string

	mu      sync.Mutex   // guards release and serializes Load and Save
	release func() error // unlocks the lock file; nil while not held
}

var (
	_ HighWaterStore = (*FileStore)(nil)
	_ io.Closer      = (*FileStore)(nil)
)

// OpenFileStore returns a store in the file at path, holding the file
// already, so that a file in use fails at start with [ErrInvalidConfig]
// rather than at the generator's first Next. It creates the file's
// directory and lock file; the mark is written on the first save.
func OpenFileStore(path string) (*FileStore, error) {
	s := &FileStore{path: path}
	if err := s.lock(); err != nil {
		return nil, err
	}
	return s, nil
}

// Load reads the mark; a missing file means none.
func (s *FileStore) Load(context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lock(); err != nil {
		return time.Time{}, err
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lock(); err != nil {
		return err
	}
	if err := s.save(t); err != nil {
		return fmt.Errorf("idgen: save high-water mark: %w", err)
	}
	return nil
}

// Close lets go of the file, so that another store can take it; it does
// not save. A closed store can be used again: its next Load or Save takes
// the file again. Close is safe to call more than once.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release == nil {
		return nil
	}
	err := s.release()
	s.release = nil
	if err != nil {
		return fmt.Errorf("idgen: unlock high-water file %s: %w", s.path, err)
	}
	return nil
}

// lock takes the file unless s holds it; s.mu is held.
func (s *FileStore) lock() error { return s.lockWith(lockFile) }

// lockWith is lock with the given way of taking a lock file.
func (s *FileStore) lockWith(lockFile func(name string) (release func() error, err error)) error {
	if s.release != nil {
		return nil
	}
	name := s.path + ".lock"
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("idgen: lock high-water file: %w", err)
	}
	release, err := lockFile(name)
	var held *lockHeld
	if errors.As(err, &held) {
		by := "another generator"
		switch held.pid {
		case strconv.Itoa(os.Getpid()):
			by = "another store in this process"
		case "":
		default:
			by = "process " + held.pid
		}
		hint := ""
		if held.stale {
			hint = "; if that process has exited, remove " + name
		}
		return fmt.Errorf("idgen: high-water file %s is in use by %s (lock file %s): give each node its own file, or stop the other generator first%s: %w",
			s.path, by, name, hint, ErrInvalidConfig)
	}
	if err != nil {
		return fmt.Errorf("idgen: lock high-water file: %w", err)
	}
	s.release = release
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
