//go:build unix && !aix && !solaris

package idgen_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemq/idemq/idgen"
)

// The kernel releases a flock(2) lock when its holder dies, so a generator
// killed with SIGKILL leaves nothing to clean up.
func TestFileStoreLockFreedByKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node-1.hwm")
	holder, _ := startHolder(t, path)
	if _, err := idgen.OpenFileStore(path); !errors.Is(err, idgen.ErrInvalidConfig) {
		t.Fatalf("OpenFileStore while another process holds the file: %v", err)
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.Wait()
	s, err := idgen.OpenFileStore(path)
	if err != nil {
		t.Fatalf("OpenFileStore after the holder was killed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
