package main

import (
	"strings"
	"testing"
)

const input = `goos: linux
goarch: amd64
pkg: github.com/idemq/idemq/bench
cpu: AMD EPYC
BenchmarkWide/idemq-2         	 9732735	        36.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkWide/idemq-2         	 9891608	        38.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkWide/idemq-coarse-2  	32834689	         9.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkWide/bwmarrin-2      	 7426080	        42.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkWide/sonyflake-2     	 4968824	        74.00 ns/op	       0 B/op	       0 allocs/op
PASS
ok  	github.com/idemq/idemq/bench	6.231s
pkg: github.com/idemq/idemq/dedupe/sqldedupe
BenchmarkClaim/sqlite-2   	   10000	    120000 ns/op	    2048 B/op	      40 allocs/op
BenchmarkClaim/mysql-2    	    5000	    250000 ns/op	    4096 B/op	      80 allocs/op
BenchmarkPlain-2          	 1000000	      1000 ns/op
pkg: github.com/idemq/idemq/dedupe/redisdedupe
BenchmarkClaimComplete/serial/idemq-batch=32-2    	    3000	    320000 ns/op	   100000 msgs/s	    9000 B/op	      90 allocs/op
BenchmarkClaimComplete/serial/naive-2             	   20000	     50000 ns/op	    20000 msgs/s
pkg: github.com/idemq/idemq/remoting
BenchmarkFingerprint/redis-200B/idemq-2   	    8000	     81000 ns/op	     80000 no-fingerprint-ns/op	    6833 B/op	     150 allocs/op
BenchmarkFingerprint/redis-200B/idemq-2   	    8000	     83000 ns/op	     82000 no-fingerprint-ns/op	    6833 B/op	     150 allocs/op
BenchmarkEndToEnd/Redis/idemq-2   	       1	 50000 ns/op	 20000 msgs/s	 12.5 cpu-µs/msg	 25000 naive-ns/op	 40000 naive-msgs/s	 9.5 naive-cpu-µs/msg
pkg: github.com/idemq/idemq/idgen
BenchmarkSegment/idemq-2    	300000000	         4.00 ns/op	       250000000 IDs/s	      1.000 calls/segment	       0 B/op	       0 allocs/op
BenchmarkSegment/idemq-2    	300000000	         4.00 ns/op	       250000000 IDs/s	      1.000 calls/segment	       0 B/op	       0 allocs/op
BenchmarkSegment/naive-2    	10000000	        80.00 ns/op	       0 B/op	       0 allocs/op
`

func TestRender(t *testing.T) {
	res, err := parse(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	got := render(res, "idemq")
	for _, want := range []string{
		"goos: linux, goarch: amd64, cpu: AMD EPYC",
		"## github.com/idemq/idemq/bench",
		"### Wide",
		"| | ns/op | ops/s | B/op | allocs/op | vs bwmarrin | vs sonyflake |",
		"| idemq | 37 | 27.03M | 0 | 0 | 0.88× | 0.50× |", // mean of two runs
		"| idemq-coarse | 9 | 111.11M | 0 | 0 | 0.21× | 0.12× |",
		"| bwmarrin | 42 | 23.81M | 0 | 0 |  |  |",
		"## github.com/idemq/idemq/dedupe/sqldedupe",
		"| | ns/op | ops/s | B/op | allocs/op |\n", // no peers of ours: no ratios
		"| sqlite | 120000 | 8.33k | 2048 | 40 |",
		"### Plain",
		"| BenchmarkPlain | 1000 | 1.00M |  |  |",
		// per message, from msgs/s, although one op is a batch of 32
		"| idemq-batch=32 | 10000 | 100.00k | 9000 | 90 | 0.20× |",
		"| naive | 50000 | 20.00k |  |  |  |",
		// a peer timed in turns with the row, from its metric; the memory
		// figures are the pair's
		"| idemq | 82000 | 12.20k |  |  | 1.01× |",
		"| no-fingerprint | 81000 | 12.35k |  |  |  |",
		// a peer's own metrics in its row
		"| idemq | 50000 | 20.00k |  |  | 2.00× | cpu-µs/msg 12.5 |",
		"| naive | 25000 | 40.00k |  |  |  | cpu-µs/msg 9.50 |",
		// a row's own metrics, in a last column only where some row has them
		"| | ns/op | ops/s | B/op | allocs/op | vs naive | other metrics |",
		"| idemq | 4 | 250.00M | 0 | 0 | 0.05× | IDs/s 250.00M, calls/segment 1 |",
		"| naive | 80 | 12.50M | 0 | 0 |  |  |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if len(res.failures) != 0 {
		t.Errorf("failures %q", res.failures)
	}
}

func TestParseFailures(t *testing.T) {
	res, err := parse(strings.NewReader(input + "--- FAIL: BenchmarkX\nFAIL\tgithub.com/idemq/idemq/bench\t0.1s\n"))
	if err != nil || len(res.failures) != 2 {
		t.Fatalf("failures %q, %v", res.failures, err)
	}
	if _, err := parse(strings.NewReader("PASS\n")); err == nil {
		t.Fatal("no error for input without benchmarks")
	}
	if _, err := parse(strings.NewReader("BenchmarkX-2 10 1 ns/op 5\n")); err == nil {
		t.Fatal("no error for a malformed line")
	}
}

// TestPeerOrder: a row's peers become columns and rows in the order the
// row names them (go test sorts the metrics by unit), although a longer
// name is matched first.
func TestPeerOrder(t *testing.T) {
	res, err := parse(strings.NewReader("pkg: p\n" +
		"BenchmarkE2E/idemq-2 1 100 ns/op 50 naive-ns/op 9 naive-cpu-µs/msg 200 watermill-dedup-ns/op 7 watermill-dedup-cpu-µs/msg\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := render(res, "idemq")
	for _, want := range []string{
		"| | ns/op | ops/s | B/op | allocs/op | vs naive | vs watermill-dedup | other metrics |",
		"| idemq | 100 | 10.00M |  |  | 2.00× | 0.50× |  |\n" +
			"| naive | 50 | 20.00M |  |  |  |  | cpu-µs/msg 9 |\n" +
			"| watermill-dedup | 200 | 5.00M |  |  |  |  | cpu-µs/msg 7 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
