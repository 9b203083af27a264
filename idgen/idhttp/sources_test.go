package idhttp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/memidgen"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
)

// source is a segment source with the operator's call the tests use.
type source interface {
	segment.Store
	CreateTag(context.Context, segment.Tag) error
}

// backend makes segment sources of one kind.
type backend struct {
	name string
	// open returns a fresh source without tags.
	open func(t testing.TB) source
}

// backends are the real sources, and the in-memory one.
var backends = []backend{
	{"Mem", func(testing.TB) source { return memidgen.NewSegments() }},
	{"Redis", openRedis},
	{"SQLite", sqlBackend(testdb.SQLite)},
	{"MySQL", sqlBackend(testdb.MySQL)},
	{"Postgres", sqlBackend(testdb.Postgres)},
}

// openRedis returns a source in a namespace of the test's own on the
// shared Redis.
func openRedis(t testing.TB) source {
	c := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	s, err := redisidgen.NewSegments(c, table(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sqlBackend opens a fresh database and migrates the table of tags; on
// the shared MySQL and PostgreSQL the table is the test's own.
func sqlBackend(b testdb.Backend) func(testing.TB) source {
	return func(t testing.TB) source {
		s, err := sqlidgen.NewSegments(b.Open(t), b.Dialect, table(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// table is a table name of t's own, also when tests run again on the
// same server.
func table(t testing.TB) string {
	b := []byte("idhttp_")
	for _, r := range t.Name() {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			b = append(b, byte(r))
		}
	}
	return fmt.Sprintf("%.40s_%x", b, rand.Uint32())
}

// create makes tags in src.
func create(t testing.TB, src source, tags ...segment.Tag) {
	t.Helper()
	for _, tg := range tags {
		if err := src.CreateTag(context.Background(), tg); err != nil {
			t.Fatal(err)
		}
	}
}
