package consumerfault

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// settings is what a child needs to know.
type settings struct {
	Namesrv  string
	Proxy    string // the 5.x proxy's gRPC endpoint, for the gRPC roles
	Redis    string
	Topic    string
	Group    string
	Instance string // the rocketmq client's instance name, unique per client
	Prefix   string // of the dedupe records
	Ledger   string
	Lease    time.Duration
	// Work is how long a worker's handler takes; it applies its effect
	// after a fifth of it.
	Work time.Duration
}

// Roles of a child.
const (
	// roleHolder says "ready" once it consumes, then claims every message
	// and blocks in its handler until killed, saying "hold KEY RECONSUMED"
	// for each (and "lost KEY CAUSE" should a lease be lost). A message
	// whose body starts with failFirst fails its first attempt ("failed
	// KEY"), so that it is held on its redelivery, its last reconsume.
	roleHolder = "holder"
	// roleWorker applies messages (see [settings.Work]), saying "ready"
	// once it consumes, until SIGTERM; then it says "term running=N
	// past-effect=M" and drains, saying "stats …" (and "drain-error …"
	// if the drain ran out of its bound).
	roleWorker = "worker"
)

// failFirst starts the body of a message whose first attempt the holder
// fails.
var failFirst = []byte("fail-first ")

// drainBound bounds a worker's drain.
const drainBound = 10 * time.Second

// roles are the children's roles, for racechild.Main.
var roles = map[string]func() error{
	roleHolder:     role(hold),
	roleWorker:     role(work),
	roleGRPCHolder: role(grpcHold),
	roleGRPCTaker:  role(grpcTake),
	roleGRPCWorker: role(grpcWork),
}

// role is a child's role that runs run with the child's settings, a Redis
// client of them and a logger to standard error.
func role(run func(settings, *redis.Client, *slog.Logger) error) func() error {
	return func() error {
		var s settings
		if err := racechild.Settings(&s); err != nil {
			return err
		}
		rdb := redis.NewClient(&redis.Options{Addr: s.Redis})
		defer rdb.Close()
		return run(s, rdb, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	}
}

// start subscribes a push consumer to s.Topic with cb and starts it.
func start(s settings, cb func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error), opts ...rmq.Option) (rocketmq.PushConsumer, error) {
	pc, err := remotingread.PushConsumer(s.Namesrv, s.Group, s.Instance, opts...)
	if err != nil {
		return nil, err
	}
	if err := pc.Subscribe(s.Topic, rmq.MessageSelector{}, cb); err != nil {
		return nil, err
	}
	if err := pc.Start(); err != nil {
		return nil, err
	}
	return pc, nil
}

// childConsumer is a child's Consumer of s.Group on the run's Redis
// store, with s's lease, the test broker's delay levels and opts.
func childConsumer(s settings, rdb *redis.Client, log *slog.Logger, opts ...consumer.Option) (*consumer.Consumer, error) {
	store, err := newStore(rdb, s.Prefix)
	if err != nil {
		return nil, err
	}
	return consumer.New(store, s.Group, append([]consumer.Option{consumer.WithGuard(guardConfig(s.Lease)), consumer.WithLogger(log),
		consumer.WithDelayLevels(brokerLevels...)}, opts...)...)
}

// hold is the holder's life; it ends when it is killed (or standard input
// closes).
func hold(s settings, rdb *redis.Client, log *slog.Logger) error {
	c, err := childConsumer(s, rdb, log, consumer.WithMaxReconsumeTimes(1))
	if err != nil {
		return err
	}
	handle := func(ctx context.Context, m *consumer.Message) error {
		key := msgkey.Of(m)
		if m.Reconsumed == 0 && bytes.HasPrefix(m.Body, failFirst) {
			racechild.Say("failed %s", key)
			return errors.New("the first attempt fails")
		}
		// Claimed, its lease renewed in the background: block, the effect
		// not applied, until killed.
		racechild.Say("hold %s %d", key, m.Reconsumed)
		<-ctx.Done()
		racechild.Say("lost %s %v", key, context.Cause(ctx))
		return context.Cause(ctx)
	}
	// Room for every held handler: the client runs at most
	// ConsumeGoroutineNums callbacks per topic and queues the rest.
	if _, err := start(s, remoting.Concurrently(c, handle), rmq.WithMaxReconsumeTimes(1), rmq.WithConsumeGoroutineNums(64)); err != nil {
		return err
	}
	racechild.Say("ready")
	<-racechild.Stopped()
	return nil
}

// workLoad is a worker's handling of a message (see [settings.Work]),
// whichever client delivers it.
type workLoad struct {
	s   settings
	rdb *redis.Client
	// running counts the handlers under way, and unrecorded those of
	// them past their effect, which is not yet recorded done.
	running, unrecorded, applied atomic.Int64
}

// handle takes s.Work and applies key's effect after a fifth of it.
func (w *workLoad) handle(ctx context.Context, key string) error {
	w.running.Add(1)
	defer w.running.Add(-1)
	time.Sleep(w.s.Work / 5)
	if err := apply(ctx, w.rdb, w.s.Ledger, key); err != nil {
		return err
	}
	w.applied.Add(1)
	w.unrecorded.Add(1)
	defer w.unrecorded.Add(-1)
	time.Sleep(w.s.Work * 4 / 5)
	return nil
}

// term says "term running=N past-effect=M" once a handler is past its
// effect, or a second passed. The signal of a deploy lands while handlers
// run, under load nearly always; this makes sure that one has applied its
// effect and not returned.
func (w *workLoad) term() {
	for end := time.Now().Add(time.Second); w.unrecorded.Load() == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	racechild.Say("term running=%d past-effect=%d", w.running.Load(), w.unrecorded.Load())
}

// work is a worker's life.
func work(s settings, rdb *redis.Client, log *slog.Logger) error {
	c, err := childConsumer(s, rdb, log)
	if err != nil {
		return err
	}
	load := &workLoad{s: s, rdb: rdb}
	handle := func(ctx context.Context, m *consumer.Message) error { return load.handle(ctx, msgkey.Of(m)) }
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	pc, err := start(s, remoting.Concurrently(c, handle))
	if err != nil {
		return err
	}
	racechild.Say("ready")
	select {
	case <-term:
	case <-racechild.Stopped():
		return pc.Shutdown()
	}
	load.term()
	ctx, cancel := context.WithTimeout(context.Background(), drainBound)
	defer cancel()
	begin := time.Now()
	err = remoting.Drain(ctx, c, pc)
	st := c.Stats
	racechild.Say("stats drain=%v delivered=%d completed=%d suppressed=%d failed=%d busy=%d waited=%d held=%d leaselost=%d unrecorded=%d storedown=%d applied=%d",
		time.Since(begin).Round(time.Millisecond), st().Delivered, st().Completed, st().Suppressed, st().Failed, st().Busy,
		st().Waited, st().Canceled, st().LeaseLost, st().Unrecorded, st().StoreDown, load.applied.Load())
	if err != nil {
		// The drain ran out of its bound: the parent reports it.
		racechild.Say("drain-error %v", err)
	}
	return nil
}
