package testkit

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
)

// Tally is the exact outcome of a run for the keys sent: how often each
// was applied, and which were dead-lettered.
type Tally struct {
	Sent, Applied int
	// Lost are keys sent and never applied; Dead are keys found in the
	// dead-letter queue (applied or not); Doubled are keys applied more
	// than once, each with its count.
	Lost, Dead, Doubled []string
	// Extra are keys applied that were never sent.
	Extra []string
}

// Count tallies the keys of sent against applied and dead, the times each
// key was applied and dead-lettered (dead may be nil).
func Count(sent []string, applied, dead map[string]int) Tally {
	t := Tally{Sent: len(sent)}
	want := make(map[string]bool, len(sent))
	for _, k := range sent {
		want[k] = true
		n := applied[k]
		switch {
		case n == 0:
			t.Lost = append(t.Lost, k)
		case n > 1:
			t.Doubled = append(t.Doubled, fmt.Sprintf("%s×%d", k, n))
		}
		if n > 0 {
			t.Applied++
		}
	}
	for k := range dead {
		t.Dead = append(t.Dead, k)
	}
	for k := range applied {
		if !want[k] {
			t.Extra = append(t.Extra, k)
		}
	}
	slices.Sort(t.Dead)
	slices.Sort(t.Extra)
	return t
}

// Settle waits until read counts every key of sent applied or
// dead-lettered and idle (if not nil) says so, or timeout passes (an error
// of tb); then for quiet more, so that a late duplicate shows. It returns
// the tally and how long the wait took.
func Settle(tb testing.TB, sent []string, read func() (applied, dead map[string]int), idle func() bool, timeout, quiet time.Duration) (Tally, time.Duration) {
	tb.Helper()
	begin := time.Now()
	for {
		applied, dead := read()
		done := 0
		for _, k := range sent {
			if applied[k] > 0 || dead[k] > 0 {
				done++
			}
		}
		if done == len(sent) && (idle == nil || idle()) {
			break
		}
		if time.Since(begin) > timeout {
			tb.Errorf("after %v, %d of %d keys neither applied nor dead-lettered", timeout, len(sent)-done, len(sent))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	waited := time.Since(begin)
	time.Sleep(quiet)
	applied, dead := read()
	return Count(sent, applied, dead), waited
}

// Decided reports whether every message st counted as delivered reached
// an outcome: no callback is under way.
func Decided(st consumer.Stats) bool {
	n := int64(0)
	for _, c := range []int64{st.Completed, st.Suppressed, st.Failed, st.Busy, st.Reused, st.StoreDown,
		st.InvalidKey, st.LeaseLost, st.Unrecorded, st.Unguarded, st.Canceled} {
		n += c
	}
	return n == st.Delivered
}

func (t Tally) String() string {
	return fmt.Sprintf("sent=%d applied=%d lost=%d dead-lettered=%d doubled=%d unknown=%d",
		t.Sent, t.Applied, len(t.Lost), len(t.Dead), len(t.Doubled), len(t.Extra))
}

// Check fails tb unless tl counts nothing lost, dead-lettered, doubled or
// unknown, naming the first 20 keys of each.
func (t Tally) Check(tb testing.TB) {
	tb.Helper()
	if len(t.Lost)+len(t.Dead)+len(t.Doubled)+len(t.Extra) == 0 {
		return
	}
	tb.Errorf("%v; want every key applied exactly once and none dead-lettered", t)
	for _, l := range []struct {
		what string
		keys []string
	}{{"lost", t.Lost}, {"dead-lettered", t.Dead}, {"doubled", t.Doubled}, {"unknown", t.Extra}} {
		if len(l.keys) > 0 {
			tb.Errorf("%s: %s", l.what, JoinMax(l.keys, 20))
		}
	}
}

// JoinMax joins the first n of s with spaces, saying how many more there
// are.
func JoinMax(s []string, n int) string {
	if len(s) > n {
		return strings.Join(s[:n], " ") + fmt.Sprintf(" … (%d more)", len(s)-n)
	}
	return strings.Join(s, " ")
}
