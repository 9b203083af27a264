package sqlidgen

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/sqldialect"
)

// DefaultWorkerTable is the table [WorkerNodes] uses unless
// [WorkerNodesConfig.Table] names another.
const DefaultWorkerTable = "idemq_worker_node"

// maxWorkerField is the bytes of a host name or port uid-generator's
// WORKER_NODE table holds.
const maxWorkerField = 64

// NodeType is the TYPE column of uid-generator's WORKER_NODE table.
type NodeType int

// Node types, numbered as uid-generator numbers them.
const (
	// Container is a process in a container (uid-generator's CONTAINER).
	Container NodeType = 1
	// Actual is a process on a host or virtual machine (uid-generator's
	// ACTUAL).
	Actual NodeType = 2
)

func (t NodeType) String() string {
	switch t {
	case Container:
		return "container"
	case Actual:
		return "actual"
	}
	return fmt.Sprintf("NodeType(%d)", int(t))
}

// WorkerNodesConfig holds the optional settings of [WorkerNodes]. The zero
// value works.
type WorkerNodesConfig struct {
	// Table is the name of the table of starts, under the rules of
	// [Config.Table]. Name uid-generator's own table ("WORKER_NODE") to
	// share its node ids with Java processes using the same layout.
	// Default [DefaultWorkerTable].
	Table string
	// Host is recorded as the start's HOST_NAME, cut to 64 bytes. Default
	// the host name the kernel reports.
	Host string
	// Port is recorded as the start's PORT, cut to 64 bytes: whatever tells
	// this start apart on its host. Default the [idgen.LeaseRequest]'s
	// Owner, or the process id when that is empty.
	Port string
	// Type is recorded as the start's TYPE. Default [Actual].
	Type NodeType
}

func (c *WorkerNodesConfig) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultWorkerTable
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Type == 0 {
		c.Type = Actual
	}
}

// Validate reports settings that cannot work, wrapping
// [idgen.ErrInvalidConfig].
func (c WorkerNodesConfig) Validate() error {
	switch {
	case !sqldialect.ValidTable(c.Table):
		return fmt.Errorf("sqlidgen: config: Table %q: want %s: %w", c.Table, sqldialect.TableRule, idgen.ErrInvalidConfig)
	case c.Type != Container && c.Type != Actual:
		return fmt.Errorf("sqlidgen: config: Type %v: want Container or Actual: %w", c.Type, idgen.ErrInvalidConfig)
	}
	return nil
}

// WorkerNodes is an [idgen.Leaser] in the manner of Baidu's uid-generator:
// every Acquire inserts a row into a table of starts shaped like its
// WORKER_NODE table and the row's auto-increment id is the node id, never
// granted again, so node 0 is never used. Its lease has a TTL of 0 and
// needs no renewal; Release only records the end. uid-generator's Java
// processes can share the table ([WorkerNodesConfig.Table]) when they use
// the same layout. It is safe for concurrent use by multiple goroutines and
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
	db  *sql.DB
	d   Dialect
	cfg WorkerNodesConfig
	q   workerSQL
}

var _ idgen.Leaser = (*WorkerNodes)(nil)

// NewWorkerNodes returns WorkerNodes over db, which speaks d. It does not
// touch the database: call [WorkerNodes.Migrate] to create the table, or
// create it from [WorkerNodes.Schema]. It never closes db.
func NewWorkerNodes(db *sql.DB, d Dialect, cfg WorkerNodesConfig) (*WorkerNodes, error) {
	if err := checkDB(db, d); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port = clip(cfg.Host, maxWorkerField), clip(cfg.Port, maxWorkerField)
	return &WorkerNodes{db: db, d: d, cfg: cfg, q: newWorkerSQL(d, cfg.Table)}, nil
}

// Config returns the settings, defaults filled in.
func (w *WorkerNodes) Config() WorkerNodesConfig { return w.cfg }

// Schema returns the statement [WorkerNodes.Migrate] runs, for migration
// tools that manage the schema themselves.
func (w *WorkerNodes) Schema() []string { return slices.Clone(w.q.ddl) }

// Migrate creates the table unless it exists.
func (w *WorkerNodes) Migrate(ctx context.Context) error {
	return migrate(ctx, w.db, w.cfg.Table, w.q.ddl)
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
		return idgen.Lease{}, fmt.Errorf("sqlidgen: table %s assigns node ids itself; it cannot register static node %d: %w", w.cfg.Table, req.Node, idgen.ErrInvalidConfig)
	}
	if req.MaxNode < 1 {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: table %s numbers nodes from 1, but the layout holds only node 0: use a layout with node bits: %w", w.cfg.Table, idgen.ErrInvalidConfig)
	}
	port := w.cfg.Port
	if port == "" {
		port = clip(req.Owner, maxWorkerField)
	}
	if port == "" {
		port = strconv.Itoa(os.Getpid())
	}
	id, err := w.insert(ctx, port)
	if err != nil {
		return idgen.Lease{}, fail(ctx, "record a start in "+w.cfg.Table, err)
	}
	if id > req.MaxNode {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: table %s gave this start id %d, past the largest node id %d the layout holds: every id was used once; use a layout with more node bits, or empty %s and reset its auto-increment counter after every process using its ids has stopped: %w",
			w.cfg.Table, id, req.MaxNode, w.cfg.Table, idgen.ErrInvalidConfig)
	}
	return idgen.Lease{Node: id, Token: strconv.FormatInt(id, 10)}, nil
}

func (w *WorkerNodes) insert(ctx context.Context, port string) (int64, error) {
	args := []any{w.cfg.Host, port, int(w.cfg.Type)}
	if w.d == MySQL {
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
		return fail(ctx, fmt.Sprintf("record the end of node %d in %s", lease.Node, w.cfg.Table), err)
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
func newWorkerSQL(d Dialect, table string) workerSQL {
	t := sqldialect.Of(d).Quote(table)
	cols := ` (host_name, port, type, launch_date, modified, created)`
	var q workerSQL
	switch d {
	case MySQL:
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
	case Postgres:
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
