package memidgen_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/internal/memidgen"
)

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	pools := map[string]*memidgen.Leaser{}
	leasetest.Run(t, func(t *testing.T, p leasetest.Pool) idgen.Leaser {
		mu.Lock()
		defer mu.Unlock()
		if pools[p.Name] == nil {
			l, err := memidgen.New(memidgen.Config{Size: p.Size, Lease: p.TTL})
			if err != nil {
				t.Fatal(err)
			}
			pools[p.Name] = l
		}
		return pools[p.Name]
	}, func(_ context.Context, l idgen.Leaser, node int64) (string, error) {
		return l.(*memidgen.Leaser).Owner(node), nil
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []memidgen.Config{{}, {Size: -1}, {Size: 4, Lease: -1}} {
		if _, err := memidgen.New(cfg); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
