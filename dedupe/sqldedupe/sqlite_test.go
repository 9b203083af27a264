package sqldedupe_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

// TestSQLiteWritesQueue checks that a Store's own writes on SQLite wait
// for each other in process, never for the write lock: on a file without a
// busy timeout, where a write that finds the lock taken fails at once with
// SQLITE_BUSY, six goroutines claim, complete and extend through one Store
// without an error. Without the queue, the first two writes that meet
// fail. The extensions' waits are logged as a figure, not asserted.
func TestSQLiteWritesQueue(t *testing.T) {
	t.Parallel()
	dsn := "file:" + filepath.Join(t.TempDir(), "test.db") +
		"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	s := newStore(t, testdb.SQLite.OpenDSN(t, dsn), dialect.SQLite, sqldedupe.Config{})
	const writers, keys = 6, 100
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		waits []time.Duration
	)
	for w := range writers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range keys {
				ref := dedupe.Ref{Group: "g" + strconv.Itoa(w), Key: strconv.Itoa(i)}
				res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref}, time.Minute)
				if err != nil || res.Outcome != dedupe.Acquired {
					t.Errorf("Claim(%v) = %v, %v", ref, res.Outcome, err)
					return
				}
				tk := dedupe.Ticket{Ref: ref, Token: res.Token}
				start := time.Now()
				err = s.Extend(ctx, tk, time.Minute)
				wait := time.Since(start)
				if err != nil {
					t.Errorf("Extend(%v): %v", ref, err)
					return
				}
				if err := testkit.Complete(ctx, s, tk, time.Hour); err != nil {
					t.Errorf("Complete(%v): %v", ref, err)
					return
				}
				mu.Lock()
				waits = append(waits, wait)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(waits) > 0 {
		slices.Sort(waits)
		t.Logf("%d extensions among %d writers: median %v, 99th percentile %v, slowest %v",
			len(waits), writers, waits[len(waits)/2], waits[len(waits)*99/100], waits[len(waits)-1])
	}
}
