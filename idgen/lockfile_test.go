package idgen

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The lock of systems without flock(2), tested everywhere.
func TestLockExclusive(t *testing.T) {
	tests := []struct {
		name     string
		content  string // of a lock file left behind; none if empty
		wantHeld string // the holder's pid in the error
	}{
		{"free", "", ""},
		{"left by a crash", "4242\n", "4242"},
		{"garbage left behind", "not a pid", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hwm")
			lock := path + ".lock"
			if tt.content != "" {
				if err := os.WriteFile(lock, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
				_, err := lockExclusive(lock)
				var held *lockHeld
				if !errors.As(err, &held) || held.pid != tt.wantHeld || !held.stale {
					t.Fatalf("lock left behind: %#v", err)
				}
				// The store's error tells the operator what to
				// remove.
				s := &FileStore{path: path}
				err = s.lockWith(lockExclusive)
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "remove "+lock) {
					t.Fatalf("store on a lock left behind: %v", err)
				}
				if err := os.Remove(lock); err != nil {
					t.Fatal(err)
				}
			}
			release, err := lockExclusive(lock)
			if err != nil {
				t.Fatal(err)
			}
			_, err = lockExclusive(lock)
			var held *lockHeld
			if !errors.As(err, &held) || held.pid != strconv.Itoa(os.Getpid()) {
				t.Fatalf("second lock: %#v", err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("lock file after release: %v", err)
			}
			release, err = lockExclusive(lock)
			if err != nil {
				t.Fatalf("lock after release: %v", err)
			}
			release()
		})
	}
}
