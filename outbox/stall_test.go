package outbox_test

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// roleStalledRelay is a relay process that stops itself (SIGSTOP) inside
// its first claim, holding the claim lock, after saying "holding". Once
// continued it relays on, says what it logs ("log …") and, when told to
// stop, the keys it sent ("sent …").
const roleStalledRelay = "stalled-relay"

// stalledSettings are a stalled relay's settings.
type stalledSettings struct {
	Backend, DSN string
	Lease        time.Duration
}

// sayWriter tells the parent each line written to it.
type sayWriter struct{}

func (sayWriter) Write(p []byte) (int, error) {
	racechild.Say("log %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

func runStalledRelay() error {
	var s stalledSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	db, b, err := testdb.OpenNamed(s.Backend, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	o, err := outbox.New(db, b.Dialect, new(counter), outbox.Config{})
	if err != nil {
		return err
	}
	// A SIGSTOP a process sends itself lands asynchronously: the kernel
	// may stop another thread first, and the claim's goroutine ran on
	// for long enough to send its lease now and then. The hook waits for
	// the SIGCONT that ends the stop, so the claim holds still in between.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	var once sync.Once
	outbox.SetClaimHook(func() {
		once.Do(func() {
			racechild.Say("holding")
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			<-cont
		})
	})
	sent := new(recorder)
	r, err := outbox.NewRelay(o, sent, outbox.RelayConfig{Batch: 20, Lease: s.Lease, Logger: slog.New(slog.NewTextHandler(sayWriter{}, nil))})
	if err != nil {
		return err
	}
	<-racechild.Stopped()
	r.Close()
	var keys []string
	for _, m := range sent.sent() {
		keys = append(keys, msgkey.Of(msgkey.Properties(m.Properties)))
	}
	racechild.Say("sent %s", strings.Join(keys, " "))
	return nil
}

// TestRelayStoppedInsideAClaim stops a relay process (SIGSTOP) inside a
// claim, holding the claim lock, between its choice of rows and their
// lease. The other relays ship every row meanwhile, within one lease of
// the stop: the database ends the stopped relay's claim after
// claimHold (a fifth of the lease, at least a second). Continued, the
// stopped relay's claim fails on its ended session and it ships nothing:
// each row ships once, each key in order.
//
// SQLite is not run: a claim there is one statement, and a process stopped
// inside it holds the database's only write lock (see the package doc).
func TestRelayStoppedInsideAClaim(t *testing.T) {
	const (
		n, keys = 200, 10
		lease   = 5 * time.Second
	)
	forBackends(t, []testdb.Backend{testdb.MySQL, testdb.Postgres}, func(t *testing.T, e env) {
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(n, keys)...)

		stalled := racechild.Start(t, roleStalledRelay, "stalled relay", stalledSettings{Backend: e.b.Name, DSN: e.dsn, Lease: lease})
		stalled.Expect(t, "holding", time.Minute)
		testkit.WaitFor(t, "the relay stopped", func() bool { return processState(t, stalled.Pid()) == 'T' })
		stopped := time.Now()

		rec := new(recorder)
		for range 2 {
			newRelay(t, e.reopen(t), rec, outbox.RelayConfig{Batch: 20, Lease: lease})
		}
		waitStats(t, e.o, "a row sent by the other relays", func(s outbox.Counts) bool { return s.Sent > 0 })
		takeover := time.Since(stopped)
		waitStats(t, e.o, "every row sent", func(s outbox.Counts) bool { return s.Sent == n })
		all := time.Since(stopped)
		t.Logf("%s: first row sent %v after the stop, all %d %v after it", e.b.Name, takeover.Round(time.Millisecond), n, all.Round(time.Millisecond))
		if all > lease {
			t.Errorf("the other relays shipped every row %v after the stop, want within the lease (%v)", all, lease)
		}

		stalled.Resume(t)
		// Its claim goes on from the hook and fails: the database ended
		// its session.
		if line := stalled.Expect(t, "log ", time.Minute); !strings.Contains(line, "outbox: claim") {
			t.Errorf("the continued relay logged %q, want its claim's failure", line)
		}
		stalled.Stop()
		if line := stalled.Expect(t, "sent", time.Minute); strings.TrimSpace(strings.TrimPrefix(line, "sent")) != "" {
			t.Errorf("the continued relay %s: want nothing, the others shipped every row", line)
		}
		stalled.Wait(t, time.Minute, nil)
		checkOrder(t, rec.sent(), n, keys)
	})
}

// processState returns the state letter of process pid (R, S, T, ...).
func processState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return b[i+2]
}
