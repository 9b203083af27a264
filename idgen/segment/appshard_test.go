package segment_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/idemq/idemq/idgen/memidgen"
	"github.com/idemq/idemq/idgen/segment"
)

func TestAppShard(t *testing.T) {
	for _, tt := range []struct {
		name              string
		p                 segment.AppShard
		index, shard, app int64
		want              int64
		err               error
	}{
		{name: "64 shards of 256 apps", p: segment.Shards64Apps256, index: 1000, shard: 5, app: 1, want: 1000<<14 | 5<<8 | 1},
		{name: "64 shards of 256 apps, largest", p: segment.Shards64Apps256, index: 1<<49 - 1, shard: 63, app: 255, want: math.MaxInt64},
		{name: "zero packing", p: segment.AppShard{}, index: math.MaxInt64, want: math.MaxInt64},
		{name: "no shards", p: segment.AppShard{AppBits: 4}, index: 3, app: 15, want: 3<<4 | 15},
		{name: "index too large", p: segment.Shards64Apps256, index: 1 << 49, err: segment.ErrRange},
		{name: "negative index", p: segment.Shards64Apps256, index: -1, err: segment.ErrRange},
		{name: "shard too large", p: segment.Shards64Apps256, shard: 64, err: segment.ErrRange},
		{name: "negative shard", p: segment.Shards64Apps256, shard: -1, err: segment.ErrRange},
		{name: "app too large", p: segment.Shards64Apps256, app: 256, err: segment.ErrRange},
		{name: "negative app", p: segment.Shards64Apps256, app: -1, err: segment.ErrRange},
		{name: "no index bits", p: segment.AppShard{ShardBits: 31, AppBits: 32}, err: segment.ErrInvalidConfig},
		{name: "negative bits", p: segment.AppShard{ShardBits: -1}, err: segment.ErrInvalidConfig},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.p.Pack(tt.index, tt.shard, tt.app)
			if !errors.Is(err, tt.err) || (err != nil) != (tt.err != nil) {
				t.Fatalf("Pack(%d, %d, %d) = %d, %v, want error %v", tt.index, tt.shard, tt.app, id, err, tt.err)
			}
			if err != nil {
				return
			}
			if id != tt.want {
				t.Fatalf("Pack(%d, %d, %d) = %d, want %d", tt.index, tt.shard, tt.app, id, tt.want)
			}
			if i, s, a := tt.p.Unpack(id); i != tt.index || s != tt.shard || a != tt.app {
				t.Fatalf("Unpack(%d) = %d, %d, %d", id, i, s, a)
			}
		})
	}
}

func TestAppShardMaxIndex(t *testing.T) {
	for _, p := range []segment.AppShard{{}, segment.Shards64Apps256, {ShardBits: 62}, {ShardBits: 30, AppBits: 32}} {
		max := p.MaxIndex()
		if _, err := p.Pack(max, p.Shards()-1, 0); err != nil {
			t.Errorf("%+v: Pack(MaxIndex %d): %v", p, max, err)
		}
		if max < math.MaxInt64 {
			if _, err := p.Pack(max+1, 0, 0); !errors.Is(err, segment.ErrRange) {
				t.Errorf("%+v: Pack(MaxIndex+1) = %v, want ErrRange", p, err)
			}
		}
	}
}

func TestAppShardShardOf(t *testing.T) {
	counts := make([]int, segment.Shards64Apps256.Shards())
	for i := range 64_000 {
		s := segment.Shards64Apps256.ShardOf(fmt.Sprintf("user%d@example.com", i))
		if s < 0 || s >= segment.Shards64Apps256.Shards() {
			t.Fatalf("ShardOf = %d outside the %d shards", s, segment.Shards64Apps256.Shards())
		}
		counts[s]++
	}
	// 1000 keys a shard on average: a fair hash keeps every shard within
	// a few standard deviations (about 32).
	for s, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d got %d of 64000 keys", s, n)
		}
	}
	if s := (segment.AppShard{AppBits: 8}).ShardOf("anyone"); s != 0 {
		t.Errorf("ShardOf without shard bits = %d", s)
	}
}

func FuzzAppShard(f *testing.F) {
	f.Add(6, 8, int64(1000), int64(5), int64(1))
	f.Add(0, 0, int64(math.MaxInt64), int64(0), int64(0))
	f.Add(31, 31, int64(1), int64(1<<31-1), int64(1<<31-1))
	f.Fuzz(func(t *testing.T, shardBits, appBits int, index, shard, app int64) {
		p := segment.AppShard{ShardBits: shardBits, AppBits: appBits}
		id, err := p.Pack(index, shard, app)
		if p.Validate() != nil {
			if !errors.Is(err, segment.ErrInvalidConfig) {
				t.Fatalf("%+v: Pack = %v, want ErrInvalidConfig", p, err)
			}
			return
		}
		fits := index >= 0 && index <= p.MaxIndex() && shard >= 0 && shard < p.Shards() && app >= 0 && app < 1<<appBits
		if !fits {
			if !errors.Is(err, segment.ErrRange) {
				t.Fatalf("%+v: Pack(%d, %d, %d) = %d, %v, want ErrRange", p, index, shard, app, id, err)
			}
			return
		}
		if err != nil || id < 0 {
			t.Fatalf("%+v: Pack(%d, %d, %d) = %d, %v", p, index, shard, app, id, err)
		}
		if i, s, a := p.Unpack(id); i != index || s != shard || a != app {
			t.Fatalf("%+v: Unpack(Pack(%d, %d, %d)) = %d, %d, %d", p, index, shard, app, i, s, a)
		}
	})
}

// A Leaf-style service's IDs: a segment tag per application and shard,
// whose maximum keeps the index within its 49 bits, and the index packed
// above the shard and the application.
func ExampleAppShard() {
	ctx := context.Background()
	p := segment.Shards64Apps256
	const app = 1
	shard := p.ShardOf("alice@example.com")
	tag := fmt.Sprintf("app%d-shard%d", app, shard)

	src := memidgen.NewSegments()
	if err := src.CreateTag(ctx, segment.Tag{Tag: tag, MaxID: 1000, Step: 1000, Max: p.MaxIndex() + 1}); err != nil {
		panic(err)
	}
	alloc, err := segment.New(ctx, src, tag, segment.Config{})
	if err != nil {
		panic(err)
	}
	defer alloc.Close()

	index, err := alloc.Next(ctx)
	if err != nil {
		panic(err)
	}
	id, err := p.Pack(index, shard, app)
	if err != nil {
		panic(err)
	}
	i, s, a := p.Unpack(id)
	fmt.Printf("shard %d, id %d = %d<<14 | %d<<8 | %d\n", shard, id, i, s, a)
	fmt.Println("largest index:", p.MaxIndex())
	// Output:
	// shard 6, id 16385537 = 1000<<14 | 6<<8 | 1
	// largest index: 562949953421311
}
