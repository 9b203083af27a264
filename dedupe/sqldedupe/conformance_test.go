package sqldedupe_test

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testenv"
)

// mysqlOptions is MySQL through a DSN with the options that change what the
// server answers: rows affected count matched rows, and arguments are
// interpolated into the statement text by the driver.
var mysqlOptions = backend{"MySQLOptions", sqldedupe.MySQL, "mysql", func(tb testing.TB) string {
	cfg, err := mysql.ParseDSN(testenv.MySQL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ClientFoundRows, cfg.InterpolateParams = true, true
	return cfg.FormatDSN()
}}

func TestConformance(t *testing.T) {
	for _, b := range append(backends, mysqlOptions) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			// One database per dialect: the suite keeps its tests apart
			// by group, and a store per subtest shares it.
			db := b.open(t)
			dedupetest.Run(t, func(t *testing.T) dedupe.Store {
				return newStore(t, db, b.dialect, sqldedupe.Config{})
			}, dedupetest.Features{Batcher: true, Inspector: true})
		})
	}
}
