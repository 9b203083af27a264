package sqlidgen

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/sqldialect"
)

// defaultWorkerTable is the table of starts unless NewWorkerNodes names
// another.
const defaultWorkerTable = "idemq_worker_node"

// maxWorkerField is the bytes of a host name or port uid-generator's
// WORKER_NODE table holds.
const maxWorkerField = 64

// actual is uid-generator's TYPE of a process on a host or virtual machine.
const actual = 2

// WorkerNodes is an [idgen.Leaser] in the manner of Baidu's uid-generator:
// every Acquire inserts a row into a table of starts shaped like its
// WORKER_NODE table and the row's auto-increment id is the node id, never
// granted again, so node 0 is never used. Its lease has a TTL of 0 and
// needs no renewal; Release only records the end. A start's row records
// the host name (HOST_NAME), the LeaseRequest's Owner or else the process
// id (PORT) and ACTUAL (TYPE). uid-generator's Java processes can share the
// table when they use the same layout. It is safe for concurrent use by multiple goroutines and
// processes sharing the table.
//
// Every start uses up an id: once the ids pass the layout's largest node id
// (a 22-bit node field, as uid-generator's, lasts 4,194,303 starts),
// Acquire fails with an error wrapping [idgen.ErrInvalidConfig]. The fix is a
// layout with more node bits, or emptying the table and resetting its
// counter (TRUNCATE on MySQL, TRUNCATE ... RESTART IDENTITY on PostgreSQL,
// deleting the table's sqlite_sequence row too on SQLite) after every
// process using its ids has stopped.
type WorkerNodes struct {
	db    *sql.DB
	d     sqldialect.Dialect
	table string
	host  string
	q     workerSQL
}

var _ idgen.Leaser = (*WorkerNodes)(nil)

// NewWorkerNodes returns WorkerNodes over the table of starts named table
// in db, which speaks d (see [New]). table follows the rules of
// [Config].Table; "" means "idemq_worker_node", and uid-generator's own
// table ("WORKER_NODE") shares its node ids with Java processes using the
// same layout. It does not touch the database: call [WorkerNodes.Migrate]
// to create the table, or create it from [WorkerNodes.Schema]. It never
// closes db.
func NewWorkerNodes(db *sql.DB, d dialect.Dialect, table string) (*WorkerNodes, error) {
	if err := checkDB(db, d); err != nil {
		return nil, err
	}
	if table == "" {
		table = defaultWorkerTable
	}
	if !sqldialect.ValidTable(table) {
		return nil, fmt.Errorf("sqlidgen: worker nodes table %q: want %s: %w", table, sqldialect.TableRule, idgen.ErrInvalidConfig)
	}
	host, _ := os.Hostname()
	return &WorkerNodes{db: db, d: d, table: table, host: clip(host, maxWorkerField), q: newWorkerSQL(d, table)}, nil
}

// Schema returns the statement [WorkerNodes.Migrate] runs, for migration
// tools that manage the schema themselves.
func (w *WorkerNodes) Schema() []string { return slices.Clone(w.q.ddl) }

// Migrate creates the table unless it exists.
func (w *WorkerNodes) Migrate(ctx context.Context) error {
	return migrate(ctx, w.db, w.table, w.q.ddl)
}

// Acquire records a start and returns its row's id as the node id, for good:
// the lease's TTL is 0 and its HighWater zero, since no one has used the
// node before. req.Static is refused with [idgen.ErrInvalidConfig]: the
// table assigns the ids. Once the ids pass req.MaxNode every Acquire fails
// with an error wrapping [idgen.ErrInvalidConfig]; the table has run out for
// the layout, and only a layout with more node bits or emptying the table
// (resetting its auto-increment counter) after every holder has stopped
// lets processes start again. The row of a start that failed stays.
func (w *WorkerNodes) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	if req.Static {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: table %s assigns node ids itself; it cannot register static node %d: %w", w.table, req.Node, idgen.ErrInvalidConfig)
	}
	if req.MaxNode < 1 {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: table %s numbers nodes from 1, but the layout holds only node 0: use a layout with node bits: %w", w.table, idgen.ErrInvalidConfig)
	}
	port := clip(req.Owner, maxWorkerField)
	if port == "" {
		port = strconv.Itoa(os.Getpid())
	}
	id, err := w.insert(ctx, port)
	if err != nil {
		return idgen.Lease{}, fail(ctx, "record a start in "+w.table, err)
	}
	if id > req.MaxNode {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: table %s gave this start id %d, past the largest node id %d the layout holds: every id was used once; use a layout with more node bits, or empty %s and reset its auto-increment counter after every process using its ids has stopped: %w",
			w.table, id, req.MaxNode, w.table, idgen.ErrInvalidConfig)
	}
	return idgen.Lease{Node: id, Token: strconv.FormatInt(id, 10)}, nil
}

func (w *WorkerNodes) insert(ctx context.Context, port string) (int64, error) {
	args := []any{w.host, port, actual}
	if w.d == sqldialect.MySQL {
		res, err := w.db.ExecContext(ctx, w.q.insert, args...)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	var id int64
	err := w.db.QueryRowContext(ctx, w.q.insert, args...).Scan(&id)
	return id, err
}

// Renew returns lease as it is: a node of the table is never granted again,
// so it needs no renewal and has no high-water mark to keep.
func (w *WorkerNodes) Renew(_ context.Context, lease idgen.Lease, _ time.Time) (idgen.Lease, error) {
	return lease, nil
}

// Release records the end of the start as the row's modified time. The node
// is never granted again.
func (w *WorkerNodes) Release(ctx context.Context, lease idgen.Lease, _ time.Time) error {
	if _, err := w.db.ExecContext(ctx, w.q.touch, lease.Node); err != nil {
		return fail(ctx, fmt.Sprintf("record the end of node %d in %s", lease.Node, w.table), err)
	}
	return nil
}

// workerSQL holds WorkerNodes' statements for one dialect and table.
type workerSQL struct {
	ddl []string
	// insert records a start and returns its id (MySQL: the insert id).
	// Parameters: host, port, type.
	insert string
	// touch sets a start's modified time. Parameter: id.
	touch string
}

// newWorkerSQL builds the statements. The times are informative only: they
// are written as uid-generator writes them, the session's NOW() on MySQL.
func newWorkerSQL(d sqldialect.Dialect, table string) workerSQL {
	t := sqldialect.Of(d).Quote(table)
	cols := ` (host_name, port, type, launch_date, modified, created)`
	var q workerSQL
	switch d {
	case sqldialect.MySQL:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id          BIGINT      NOT NULL AUTO_INCREMENT,
	host_name   VARCHAR(64) NOT NULL,
	port        VARCHAR(64) NOT NULL,
	type        INT         NOT NULL,
	launch_date DATE        NOT NULL,
	modified    DATETIME    NOT NULL,
	created     DATETIME    NOT NULL,
	PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`}
		q.insert = `INSERT INTO ` + t + cols + ` VALUES (?, ?, ?, CURDATE(), NOW(), NOW())`
		q.touch = `UPDATE ` + t + ` SET modified = NOW() WHERE id = ?`
	case sqldialect.Postgres:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id          bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	host_name   varchar(64) NOT NULL,
	port        varchar(64) NOT NULL,
	type        integer NOT NULL,
	launch_date date NOT NULL,
	modified    timestamptz NOT NULL,
	created     timestamptz NOT NULL
)`}
		q.insert = `INSERT INTO ` + t + cols + ` VALUES ($1, $2, $3, current_date, statement_timestamp(), statement_timestamp()) RETURNING id`
		q.touch = `UPDATE ` + t + ` SET modified = statement_timestamp() WHERE id = $1`
	default:
		// AUTOINCREMENT: SQLite never hands out an id again, even that of
		// the last row after it is deleted.
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	host_name   TEXT    NOT NULL,
	port        TEXT    NOT NULL,
	type        INTEGER NOT NULL,
	launch_date TEXT    NOT NULL,
	modified    TEXT    NOT NULL,
	created     TEXT    NOT NULL
)`}
		const now = `strftime('%Y-%m-%d %H:%M:%f', 'now')`
		q.insert = `INSERT INTO ` + t + cols + ` VALUES (?, ?, ?, date('now'), ` + now + `, ` + now + `) RETURNING id`
		q.touch = `UPDATE ` + t + ` SET modified = ` + now + ` WHERE id = ?`
	}
	return q
}
