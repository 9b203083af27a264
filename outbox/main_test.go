package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

func TestMain(m *testing.M) {
	// A child runs its role and exits.
	racechild.Main(map[string]func() error{roleStalledRelay: runStalledRelay})
	os.Exit(testenv.Run(m))
}

// counter is a key source: 1, 2, 3...
type counter struct{ n atomic.Int64 }

func (c *counter) NextKey(context.Context) (string, error) {
	return "k" + strconv.FormatInt(c.n.Add(1), 10), nil
}

// env is a fresh, migrated outbox of one backend.
type env struct {
	b   testdb.Backend
	dsn string
	db  *sql.DB
	o   *outbox.Outbox
}

// reopen returns an Outbox over e's table through a pool of its own, as
// another process has.
func (e env) reopen(t *testing.T) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(e.b.OpenDSN(t, e.dsn), e.b.Dialect, new(counter), outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// forEachBackend runs test on a fresh, migrated outbox of every backend.
func forEachBackend(t *testing.T, test func(t *testing.T, e env)) {
	forBackends(t, testdb.Backends, test)
}

// forBackends runs test on a fresh, migrated outbox of each of bs.
func forBackends(t *testing.T, bs []testdb.Backend, test func(t *testing.T, e env)) {
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := env{b: b, dsn: b.DSN(t)}
			e.db = b.OpenDSN(t, e.dsn)
			e.o = newOutbox(t, e.db, b)
			test(t, e)
		})
	}
}

func newOutbox(t testing.TB, db *sql.DB, b testdb.Backend) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(db, b.Dialect, new(counter), outbox.Config{MaxBody: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return o
}

// begin begins a transaction on db, rolled back when t ends unless it was
// committed.
func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

func newRelay(t *testing.T, o *outbox.Outbox, s outbox.Sender, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := outbox.NewRelay(o, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// recorder is a Sender that keeps what it was given, in order, and fails
// the sends that fail says to.
type recorder struct {
	mu       sync.Mutex
	got      []outbox.Message
	inFlight map[string]bool
	fail     func(m *outbox.Message) error
	overlap  []string // keys sent while another send of them ran
}

func (r *recorder) Send(ctx context.Context, m *outbox.Message) error {
	return r.send([]*outbox.Message{m})
}

// send records msgs, all or none, as a broker stores a batch: the first
// error fail returns for one of them fails them all.
func (r *recorder) send(msgs []*outbox.Message) error {
	r.mu.Lock()
	if r.inFlight == nil {
		r.inFlight = map[string]bool{}
	}
	for _, m := range msgs {
		if r.inFlight[msgkey.Of(msgkey.Properties(m.Properties))] {
			r.overlap = append(r.overlap, msgkey.Of(msgkey.Properties(m.Properties)))
		}
		r.inFlight[msgkey.Of(msgkey.Properties(m.Properties))] = true
	}
	r.mu.Unlock()
	var err error
	for _, m := range msgs {
		if r.fail != nil && err == nil {
			err = r.fail(m)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		delete(r.inFlight, msgkey.Of(msgkey.Properties(m.Properties)))
		if err == nil {
			r.got = append(r.got, *m)
		}
	}
	return err
}

// batchRecorder is a recorder that takes batches too, and checks that each
// keeps the BatchSender contract.
type batchRecorder struct {
	*recorder
	batches atomic.Int64
	broken  atomic.Value // string: how a batch broke the contract
}

func (b *batchRecorder) SendBatch(ctx context.Context, msgs []*outbox.Message) error {
	b.batches.Add(1)
	for _, m := range msgs {
		if len(msgs) < 2 || m.Topic != msgs[0].Topic || m.OrderingKey != msgs[0].OrderingKey || m.Delay != 0 {
			b.broken.Store(fmt.Sprintf("a batch of %d: %+v", len(msgs), *m))
		}
	}
	return b.send(msgs)
}

// forEachSender runs test as forEachBackend does, once with a Sender that
// ships one message a call (wrap returns the recorder itself) and once
// with a BatchSender (wrap returns a batchRecorder over it), which must
// take a batch and keep the BatchSender contract.
func forEachSender(t *testing.T, test func(t *testing.T, e env, wrap func(*recorder) outbox.Sender)) {
	t.Run("send", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, e env) {
			test(t, e, func(r *recorder) outbox.Sender { return r })
		})
	})
	t.Run("batch", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, e env) {
			var b *batchRecorder
			test(t, e, func(r *recorder) outbox.Sender {
				b = &batchRecorder{recorder: r}
				return b
			})
			if b.batches.Load() == 0 {
				t.Error("no batch sent")
			}
			if s, _ := b.broken.Load().(string); s != "" {
				t.Errorf("broke the BatchSender contract: %s", s)
			}
		})
	})
}

func (r *recorder) sent() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Message(nil), r.got...)
}

func (r *recorder) count() int { return len(r.sent()) }

var errBroker = errors.New("broker busy")

// waitStats waits until the table's stats satisfy cond.
func waitStats(t *testing.T, o *outbox.Outbox, what string, cond func(outbox.Counts) bool) outbox.Counts {
	t.Helper()
	var s outbox.Counts
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		if s, err = o.Count(t.Context()); err != nil {
			t.Fatal(err)
		}
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute: %+v", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
