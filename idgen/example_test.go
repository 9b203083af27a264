package idgen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

func Example() {
	gen, err := idgen.New(7, idgen.Config{}) // Twitter layout, system clock
	if err != nil {
		panic(err)
	}
	defer gen.Close()

	id, err := gen.Next(context.Background())
	if err != nil {
		panic(err)
	}
	p := gen.Config().Layout.Decode(id)
	fmt.Println(len(id.String()), "digits; node", p.Node, "= datacenter", p.Datacenter, "worker", p.Worker)
	// Output: 19 digits; node 7 = datacenter 0 worker 7
}

func ExampleLayout_Decode() {
	p := idgen.Twitter.Decode(1541815603606036480)
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.Node, p.Datacenter, p.Worker, p.Generation, p.Sequence)
	// Output: 2022-06-28T16:07:40.105Z 378 11 26 0 0
}

func ExampleLayout_Compose() {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	node, _ := idgen.RollbackBits.NodeOf(3, 17)
	id, _ := idgen.RollbackBits.Compose(at, node, 2, 99)
	p := idgen.RollbackBits.Decode(id)
	fmt.Println(id, p.Time.Format(time.DateOnly), p.Datacenter, p.Worker, p.Generation, p.Sequence)
	// Output: 1312689645160259683 2030-01-01 3 17 2 99
}

func ExampleID_MarshalText() {
	b, _ := json.Marshal(struct {
		ID idgen.ID `json:"id"`
	}{1541815603606036480})
	fmt.Println(string(b))
	// Output: {"id":"1541815603606036480"}
}

func ExampleNodeFromHostname() {
	// In a StatefulSet, pass os.Hostname().
	node, err := idgen.NodeFromHostname(idgen.Twitter, "ingest-7")
	fmt.Println(node, err)
	_, err = idgen.NodeFromHostname(idgen.Twitter, "ingest-2048")
	fmt.Println(err)
	// Output:
	// 7 <nil>
	// idgen: invalid config: layout "twitter": node 2048 outside 0..1023 (host name "ingest-2048")
}

func ExampleBumpGeneration() {
	clock := testkit.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0) // a clock the example sets
	gen, _ := idgen.New(0, idgen.Config{Layout: idgen.RollbackBits, Clock: clock, Rollback: idgen.BumpGeneration{}})
	for range 4 {
		id, err := gen.Next(context.Background())
		if err != nil {
			fmt.Println(err)
			break
		}
		p := gen.Config().Layout.Decode(id)
		fmt.Println(p.Time.Format(time.TimeOnly), "generation", p.Generation)
		clock.Add(-time.Second) // an NTP step back
	}
	// Output:
	// 00:00:00 generation 0
	// 23:59:59 generation 1
	// 23:59:58 generation 2
	// 23:59:57 generation 3
}

func ExampleBorrow() {
	clock := testkit.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0) // a clock the example sets
	gen, _ := idgen.New(0, idgen.Config{Clock: clock, Rollback: idgen.Borrow{MaxAhead: time.Second}})
	// Three ticks' worth of IDs while the clock stands still.
	ids := make([]idgen.ID, 3*4096)
	gen.Fill(context.Background(), ids)
	fmt.Println("ahead", gen.Ahead())
	clock.Add(-100 * time.Millisecond)
	gen.Next(context.Background())
	fmt.Println("ahead", gen.Ahead())
	clock.Add(-time.Hour)
	_, err := gen.Next(context.Background())
	fmt.Println(errors.Is(err, idgen.ErrClockBackwards))
	// Output:
	// ahead 2ms
	// ahead 103ms
	// true
}

func ExampleWait() {
	// Wait out steps back of up to 15ms; on larger ones lease a fresh
	// worker id and put the old one at the tail of the pool's queue.
	cfg := idgen.Config{
		Rollback: idgen.Wait{Max: 15 * time.Millisecond, Else: idgen.SwitchWorker{}},
	}
	// Give cfg to NewLeased with a redisidgen or sqlidgen Leaser: a static
	// node has nothing to switch to.
	_, err := idgen.New(0, cfg)
	fmt.Println(errors.Is(err, idgen.ErrInvalidConfig))
	// Output: true
}

func ExampleFileStore() {
	dir, _ := os.MkdirTemp("", "idgen")
	defer os.RemoveAll(dir)
	clock := testkit.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0) // a clock the example sets
	store, err := idgen.OpenFileStore(filepath.Join(dir, "node-0.hwm"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	cfg := idgen.Config{Clock: clock, Store: store}

	first, _ := idgen.New(0, cfg)
	last, _ := first.Next(context.Background())
	first.Close() // saves the exact mark

	clock.Add(-time.Hour) // the machine restarts with its clock an hour behind
	second, _ := idgen.New(0, cfg)
	_, err = second.Next(context.Background())
	fmt.Println(err)
	clock.Add(time.Hour + time.Millisecond) // past the last tick of the first run
	id, _ := second.Next(context.Background())
	fmt.Println(id > last)
	// Output:
	// idgen: clock moved backwards: node 0: clock 1h0m0s behind the last ID
	// true
}

func ExampleConfig_coarse() {
	wide := idgen.Layout{Name: "wide", TimeBits: 41, WorkerBits: 2, SequenceBits: 20,
		Unit: time.Millisecond, Epoch: idgen.Twitter.Epoch}
	gen, _ := idgen.New(0, idgen.Config{Layout: wide, Coarse: time.Millisecond})
	defer gen.Close() // stops its coarse clock
	ids := make([]idgen.ID, 1000)
	n, err := gen.Fill(context.Background(), ids)
	fmt.Println(n, err, ids[0] < ids[999])
	// Output: 1000 <nil> true
}
