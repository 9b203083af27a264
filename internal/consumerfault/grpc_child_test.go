package consumerfault

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/msgkey"
)

// Roles of a child that consumes through the 5.x gRPC client, a
// SimpleConsumer of settings.Proxy run by grpcv5.Simple.
const (
	// roleGRPCHolder says "ready" once it receives, then claims every
	// message and blocks in its handler until killed, saying "hold KEY
	// ATTEMPT" for each (and "lost KEY CAUSE" should a lease be lost).
	roleGRPCHolder = "grpc-holder"
	// roleGRPCTaker applies messages, saying "ready" once it receives and
	// "recv KEY ATTEMPT UNIXMILLI" for each message received, until its standard
	// input closes; then it drains and says "stats …".
	roleGRPCTaker = "grpc-taker"
	// roleGRPCWorker is [roleWorker] on grpcv5.Simple: it applies
	// messages (see [settings.Work]), saying "ready" once it receives, until
	// SIGTERM; then it says "term running=N past-effect=M", closes its
	// Receiver, which drains, stops its SimpleConsumer and says "stats
	// drain=… attempts=map[…] …" (and "drain-error …" if the drain ran
	// out of its bound).
	roleGRPCWorker = "grpc-worker"
)

// grpcInvisible is the gRPC roles' invisible duration: the proxy's
// minimum for a receive.
const grpcInvisible = 10 * time.Second

// grpcConsumer is the Consumer and the started SimpleConsumer of a gRPC
// role.
func grpcConsumer(s settings, rdb *redis.Client, log *slog.Logger) (*consumer.Consumer, golang.SimpleConsumer, error) {
	c, err := childConsumer(s, rdb, log)
	if err != nil {
		return nil, nil, err
	}
	sc, err := golang.NewSimpleConsumer(&golang.Config{Endpoint: s.Proxy, ConsumerGroup: s.Group, Credentials: &credentials.SessionCredentials{}},
		// 10 s request timeouts instead of 3 s: under a whole test suite's
		// load the proxy may take longer to answer a route query.
		golang.WithClientFuncForSimpleConsumer(func(c *golang.Config, opts ...golang.ClientOption) (golang.Client, error) {
			return golang.NewClient(c, append(opts, golang.WithQueryRouteTimeout(10*time.Second))...)
		}),
		golang.WithSimpleAwaitDuration(5*time.Second),
		golang.WithSimpleSubscriptionExpressions(map[string]*golang.FilterExpression{s.Topic: golang.SUB_ALL}))
	if err != nil {
		return nil, nil, err
	}
	return c, sc, sc.Start()
}

func viewKey(m *golang.MessageView) string { return msgkey.Of(msgkey.Properties(m.GetProperties())) }

// attempt is the delivery attempt of m, which the gRPC client delivered.
func attempt(m *consumer.Message) int32 { return m.Raw.(*golang.MessageView).GetDeliveryAttempt() }

// grpcHold is the gRPC holder's life; it ends when it is killed (or
// standard input closes).
func grpcHold(s settings, rdb *redis.Client, log *slog.Logger) error {
	c, sc, err := grpcConsumer(s, rdb, log)
	if err != nil {
		return err
	}
	handle := func(ctx context.Context, m *consumer.Message) error {
		// Claimed, its lease renewed and the message kept invisible in
		// the background: block, the effect not applied, until killed.
		racechild.Say("hold %s %d", msgkey.Of(m), attempt(m))
		<-ctx.Done()
		racechild.Say("lost %s %v", msgkey.Of(m), context.Cause(ctx))
		return context.Cause(ctx)
	}
	r, err := grpcv5.Simple(c, sc, handle, grpcv5.SimpleConfig{Workers: 64, InvisibleDuration: grpcInvisible})
	if err != nil {
		return err
	}
	go r.Run(context.Background())
	racechild.Say("ready")
	<-racechild.Stopped()
	return nil
}

// recvSaid is a SimpleConsumer that says "recv KEY ATTEMPT UNIXMILLI" for
// each message it receives.
type recvSaid struct{ golang.SimpleConsumer }

func (r recvSaid) Receive(ctx context.Context, n int32, d time.Duration) ([]*golang.MessageView, error) {
	vs, err := r.SimpleConsumer.Receive(ctx, n, d)
	for _, v := range vs {
		racechild.Say("recv %s %d %d", viewKey(v), v.GetDeliveryAttempt(), time.Now().UnixMilli())
	}
	return vs, err
}

// grpcTake is the gRPC taker's life.
func grpcTake(s settings, rdb *redis.Client, log *slog.Logger) error {
	c, sc, err := grpcConsumer(s, rdb, log)
	if err != nil {
		return err
	}
	defer sc.GracefulStop()
	handle := func(ctx context.Context, m *consumer.Message) error { return apply(ctx, rdb, s.Ledger, msgkey.Of(m)) }
	r, err := grpcv5.Simple(c, recvSaid{sc}, handle, grpcv5.SimpleConfig{InvisibleDuration: grpcInvisible})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	racechild.Say("ready")
	<-racechild.Stopped()
	r.Close()
	err = <-done
	st := c.Stats
	racechild.Say("stats delivered=%d completed=%d suppressed=%d failed=%d waited=%d busy=%d retried=%d held=%d",
		st().Delivered, st().Completed, st().Suppressed, st().Failed, st().Waited, st().Busy,
		st().Retried, st().Canceled)
	return err
}

// grpcWork is a gRPC worker's life.
func grpcWork(s settings, rdb *redis.Client, log *slog.Logger) error {
	c, sc, err := grpcConsumer(s, rdb, log)
	if err != nil {
		return err
	}
	load := &workLoad{s: s, rdb: rdb}
	var (
		mu       sync.Mutex
		attempts = map[int32]int{} // deliveries handled per attempt
	)
	handle := func(ctx context.Context, m *consumer.Message) error {
		mu.Lock()
		attempts[attempt(m)]++
		mu.Unlock()
		return load.handle(ctx, msgkey.Of(m))
	}
	r, err := grpcv5.Simple(c, sc, handle, grpcv5.SimpleConfig{InvisibleDuration: grpcInvisible, DrainTimeout: drainBound})
	if err != nil {
		sc.GracefulStop()
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go r.Run(context.Background())
	racechild.Say("ready")
	select {
	case <-term:
	case <-racechild.Stopped():
		r.Close()
		return sc.GracefulStop()
	}
	load.term()
	begin := time.Now()
	err = r.Close()
	drain := time.Since(begin)
	stopErr := sc.GracefulStop()
	st := c.Stats
	mu.Lock()
	racechild.Say("stats drain=%v attempts=%v delivered=%d completed=%d suppressed=%d failed=%d busy=%d waited=%d held=%d leaselost=%d unrecorded=%d storedown=%d applied=%d",
		drain.Round(time.Millisecond), attempts, st().Delivered, st().Completed, st().Suppressed, st().Failed, st().Busy,
		st().Waited, st().Canceled, st().LeaseLost, st().Unrecorded, st().StoreDown, load.applied.Load())
	mu.Unlock()
	if err != nil {
		// The drain ran out of its bound: the parent reports it.
		racechild.Say("drain-error %v", err)
	}
	return stopErr
}
