//go:build unix

package redisdedupe_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// Leases and retention in the benchmarks: short, so that the records of a
// long run expire instead of filling Redis's memory.
const (
	benchLease     = 30 * time.Second
	benchRetention = 5 * time.Second
)

// BenchmarkClaimComplete measures the happy path of a consumer — claim a
// message, then complete it — through the store in batches of 1 and 32, on
// its native path and on its script path (as on Redis before 7.0), and
// through the naive protocol of dedupe middleware without scripts or
// batches (SET NX to claim, SET to complete: two round trips per message
// and no owner token). Each runs with one consumer goroutine ("serial")
// and with 8 ("parallel"), and reports msgs/s; compare them within one
// run.
func BenchmarkClaimComplete(b *testing.B) {
	client := newClient(b)
	stores := benchStores(b, client)
	for _, mode := range []string{"serial", "parallel"} {
		for _, size := range []int{1, 32} {
			for _, p := range paths {
				b.Run(fmt.Sprintf("%s/idemq-%s-batch=%d", mode, p.name, size), func(b *testing.B) {
					run(b, client, goroutines[mode], size, storeCycle(stores[p.name], size))
				})
			}
		}
		b.Run(mode+"/naive", func(b *testing.B) {
			run(b, client, goroutines[mode], 1, naiveCycle(client))
		})
	}
}

// benchStores returns a store over client per path, by the path's name.
func benchStores(b *testing.B, client *redis.Client) map[string]*redisdedupe.Store {
	stores := map[string]*redisdedupe.Store{}
	for _, p := range paths {
		s, err := redisdedupe.New(client, redisdedupe.Config{})
		if err != nil {
			b.Fatal(err)
		}
		p.use(s)
		stores[p.name] = s
	}
	return stores
}

// A cycle claims and completes size fresh keys, whose names start with
// prefix and end in the numbers from first.
type cycle func(ctx context.Context, prefix string, first int) error

// goroutines is how many consumer goroutines each mode runs.
var goroutines = map[string]int{"serial": 1, "parallel": 8}

// run runs c over size fresh keys at a time, b.N times in all from n
// goroutines, reports the messages per second, the CPU time per message
// of this process and of client's Redis server (from INFO cpu: read it on
// a Redis that serves the benchmark alone), and returns the messages. CPU
// times stay comparable on a loaded machine, where msgs/s do not.
func run(b *testing.B, client *redis.Client, n, size int, c cycle) int64 {
	ctx := b.Context()
	prefix := rand.Text()
	cpu0, redis0 := testkit.OwnCPU(b), serverCPU(b, client)
	var next atomic.Int64 // the next unused key number
	one := func() {
		if err := c(ctx, prefix, int(next.Add(int64(size)))-size); err != nil {
			b.Error(err)
		}
	}
	testkit.Goroutines(b, n, one)
	msgs := float64(next.Load())
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(testkit.OwnCPU(b)-cpu0)/float64(time.Microsecond)/msgs, "cpu-µs/msg")
	b.ReportMetric(float64(serverCPU(b, client)-redis0)/float64(time.Microsecond)/msgs, "redis-cpu-µs/msg")
	return next.Load()
}

// serverCPU returns the CPU time client's Redis server has used.
func serverCPU(b *testing.B, client *redis.Client) time.Duration {
	info, err := client.Info(b.Context(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for line := range strings.Lines(info) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			sec, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s", line)
			}
			sum += time.Duration(sec * float64(time.Second))
		}
	}
	return sum
}

// storeCycle claims size keys through s and completes them, in one Claim
// and one Complete.
func storeCycle(s dedupe.Store, size int) cycle {
	return func(ctx context.Context, group string, first int) error {
		reqs := make([]dedupe.Item, size)
		for i := range reqs {
			reqs[i] = dedupe.Item{Ref: dedupe.Ref{Group: group, Key: strconv.Itoa(first + i)}}
		}
		return testkit.ClaimComplete(ctx, s, reqs, make([]dedupe.Ticket, size), benchLease, benchRetention)
	}
}

// naiveCycle claims with SET NX and completes with SET.
func naiveCycle(c *redis.Client) cycle {
	return func(ctx context.Context, prefix string, first int) error {
		key := "naive:" + prefix + ":" + strconv.Itoa(first)
		ok, err := c.SetNX(ctx, key, "processing", benchLease).Result()
		if err != nil || !ok {
			return fmt.Errorf("SET NX = %v, %v", ok, err)
		}
		return c.Set(ctx, key, "done", benchRetention).Err()
	}
}
