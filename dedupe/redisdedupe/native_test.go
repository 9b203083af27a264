package redisdedupe_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

func TestMajorVersion(t *testing.T) {
	for _, tt := range []struct {
		info string
		want int // -1: an error
	}{
		{"# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n", 7},
		{"# Server\r\nredis_version:6.2.14\r\n", 6},
		{"redis_version:10.0.0", 10},
		// Valkey answers the Redis version it is compatible with.
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n", 7},
		{"# Server\r\nvalkey_version:8.1.1\r\n", -1},
		{"redis_version:\r\n", -1},
		{"redis_version:x.y\r\n", -1},
		{"", -1},
	} {
		got, err := redisdedupe.MajorVersion(tt.info)
		if tt.want < 0 && err == nil || tt.want >= 0 && (err != nil || got != tt.want) {
			t.Errorf("MajorVersion(%q) = %d, %v; want %d", tt.info, got, err, tt.want)
		}
	}
}

// failInfo fails the INFO commands of a client while it is set.
type failInfo struct{ fail atomic.Bool }

func (h *failInfo) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "info" && h.fail.Load() {
			cmd.SetErr(errors.New("injected"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h *failInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestVersionUnknown checks that a claim that cannot learn the server's
// version fails saying so, changes nothing, and that the next claim asks
// again.
func TestVersionUnknown(t *testing.T) {
	client := newClient(t)
	hook := &failInfo{}
	hook.fail.Store(true)
	client.AddHook(hook)
	s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: "version:" + rand.Text() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	req := dedupe.Item{Ref: dedupe.Ref{Group: "g", Key: "k"}}
	_, err = testkit.Claim(t.Context(), s, req, time.Hour)
	if err == nil || !strings.Contains(err.Error(), "cannot tell the Redis version (INFO server): injected") || errors.Is(err, dedupe.ErrBusy) {
		t.Fatalf("Claim without a version = %v, want the failure to tell it", err)
	}
	if _, _, err := s.Claim(t.Context(), []dedupe.Item{req}, time.Hour); err == nil || !strings.Contains(err.Error(), "Redis version") {
		t.Fatalf("Claim without a version = %v, want the failure to tell it", err)
	}
	hook.fail.Store(false)
	if res, err := testkit.Claim(t.Context(), s, req, time.Hour); err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("Claim once INFO answers = %v, %v; want acquired", res.Outcome, err)
	}
}

// beforeReads runs a function once, before the next pipeline that reads
// the records that claims found reaches Redis.
type beforeReads struct {
	mu   sync.Mutex
	f    func()
	sent []string // the commands sent since f ran
}

func (h *beforeReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *beforeReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.sent = append(h.sent, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *beforeReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		f := h.f
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "pexpiretime" }) {
			h.f = nil
		} else {
			f = nil
		}
		for _, c := range cmds {
			h.sent = append(h.sent, c.Name())
		}
		h.mu.Unlock()
		if f != nil {
			f()
		}
		return next(ctx, cmds)
	}
}

// TestRecordChanged changes a record between the SET of a claim that found
// it in flight and the reads of the record found: the claim answers for
// the record as it is then, by the claim script if it is gone.
func TestRecordChanged(t *testing.T) {
	ctx := t.Context()
	client := newClient(t)
	hook := &beforeReads{}
	client.AddHook(hook)
	prefix := "changed:" + rand.Text() + ":"
	s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: prefix})
	// The holder's store shares the records, not the hook.
	holder, herr := redisdedupe.New(newClient(t), redisdedupe.Config{Prefix: prefix})
	if err := errors.Join(err, herr); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(dedupe.Ticket) error
		want   dedupe.Outcome
	}{
		{"Released", func(tk dedupe.Ticket) error { return testkit.Release(ctx, holder, tk) }, dedupe.Acquired},
		{"Completed", func(tk dedupe.Ticket) error { return testkit.Complete(ctx, holder, tk, 2*time.Hour) }, dedupe.Suppressed},
		{"Extended", func(tk dedupe.Ticket) error { return holder.Extend(ctx, tk, 2*time.Hour) }, dedupe.Busy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := dedupe.Item{Ref: dedupe.Ref{Group: "g", Key: tc.name}}
			held, err := testkit.Claim(ctx, holder, req, time.Hour)
			if err != nil || held.Outcome != dedupe.Acquired {
				t.Fatalf("holder's claim = %v, %v", held.Outcome, err)
			}
			var changeErr error
			hook.mu.Lock()
			hook.f = func() { changeErr = tc.change(dedupe.Ticket{Ref: req.Ref, Token: held.Token}) }
			hook.sent = nil
			hook.mu.Unlock()
			res, err := testkit.Claim(ctx, s, req, time.Hour)
			hook.mu.Lock()
			sent := hook.sent
			hook.mu.Unlock()
			if changeErr != nil {
				t.Fatal(changeErr)
			}
			if err != nil || res.Outcome != tc.want {
				t.Fatalf("claim of a record %s under it = %v, %v; want %v", tc.name, res.Outcome, err, tc.want)
			}
			if scripted := slices.Contains(sent, "evalsha"); scripted != (tc.want == dedupe.Acquired) {
				t.Errorf("the claim sent %q", sent)
			}
			switch res.Outcome {
			case dedupe.Acquired:
				if err := testkit.Complete(ctx, s, dedupe.Ticket{Ref: req.Ref, Token: res.Token}, time.Hour); err != nil {
					t.Errorf("Complete with the token the claim answered: %v", err)
				}
			case dedupe.Suppressed, dedupe.Busy:
				if res.Remaining <= time.Hour || res.Remaining > 2*time.Hour || res.Until.IsZero() {
					t.Errorf("claim answered %v for %v, until %v; want the holder's new time", res.Outcome, res.Remaining, res.Until)
				}
			}
		})
	}
}
