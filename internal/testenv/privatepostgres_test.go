package testenv_test

import (
	"database/sql"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

func TestPrivatePostgresRestartKeepsData(t *testing.T) {
	r := testenv.StartPrivatePostgres(t)
	dsn := r.DSN()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if r.DSN() != dsn {
		t.Fatalf("DSN changed on restart: %s, then %s", dsn, r.DSN())
	}
	var v int
	// The pool's connection died with the server; database/sql retries a
	// bad connection on a new one.
	if err := db.QueryRowContext(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("after restart: %d, %v; want 7", v, err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(ctx); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}
