package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/internal/rmqcall"
)

const (
	// unlockTimeout bounds the unlock of the queues one rebalance takes
	// away: it runs inside the client's rebalance.
	unlockTimeout = 3 * time.Second
	// lockWait bounds how long a rebalance that gives a consumer queues
	// waits for them to be unlocked, and lockPoll is how often it tries.
	lockWait = 5 * time.Second
	lockPoll = 100 * time.Millisecond
)

// HandBack returns strategy, the allocation strategy of an orderly push
// consumer (pass it with rmq.WithStrategy; rmq.AllocateByAveragely is the
// client's default), made to hand over at once the queues that a
// rebalance moves. rocketmq-client-go leaves a queue that a rebalance
// takes from a consumer locked at the broker ("TODO orderly" in its
// removeUnnecessaryMessageQueue), and the new owner cannot consume it
// until the lock expires, 60 s after the old owner last renewed it.
// Measured with 8 queues against 4.9.7 and 5.5.0 brokers: the queues a
// joining consumer takes over, and those that move between the consumers
// that stay when one leaves, waited 60-73 s without HandBack and 3 s with
// it. (A consumer that shuts down, or drains, unlocks its own queues: those
// took 3 s either way.)
//
// With HandBack a consumer unlocks the queues a rebalance takes from it,
// and one given queues it did not hold locks them before the client does,
// trying for up to 5 s while their old owner, rebalancing at the same
// time, lets them go: the client tries once, then only at its next
// rebalance, 20 s later. A queue held by a consumer without HandBack, or
// by one that died, costs the rebalance those 5 s and still waits for the
// lock to expire.
//
// resolver names the name servers, as given to the push consumer
// (rmq.WithNsResolver). The lock and unlock are requests of their own to
// each broker's master, without TLS or an ACL signature (not tried through
// a 5.x proxy's remoting endpoint); one that fails is logged at warn
// (slog's default logger) and leaves the queue to the client, as without
// HandBack.
//
// Use it with [Orderly]: a queue is unlocked while its old owner may still
// run a message of it, until the client drops the queue a moment later,
// and that is safe because keys are claimed. The new owner waits for a key
// that another consumer holds, then suppresses it if it was completed, so
// each message runs once, after the one before it.
func HandBack(resolver primitive.NsResolver, strategy rmq.AllocateStrategy) rmq.AllocateStrategy {
	h := &handBack{resolver: resolver, held: map[holding][]*primitive.MessageQueue{}}
	return func(group, clientID string, mqAll []*primitive.MessageQueue, cidAll []string) []*primitive.MessageQueue {
		mine := strategy(group, clientID, mqAll, cidAll)
		if len(mqAll) > 0 {
			h.rebalanced(holding{group, clientID, mqAll[0].Topic}, mine, len(cidAll) > 1)
		}
		return mine
	}
}

// handBack is the state of a [HandBack] strategy: what each consumer
// it allocates for was given last, per topic. The client rebalances a
// consumer one topic at a time, so the unlock of a queue taken from it
// precedes any later rebalance that gives the queue back.
type handBack struct {
	resolver primitive.NsResolver
	mu       sync.Mutex // guards held
	held     map[holding][]*primitive.MessageQueue
}

// holding names the queues of a topic that a client of a group holds.
type holding struct{ group, clientID, topic string }

// rebalanced notes that the consumer of who is given mine now: it unlocks
// the queues it was given last time and is not now, and, with others in
// the group, who may have held them, locks those it is given anew. Unlocks
// go first: two consumers that swap queues wait for each other's.
func (h *handBack) rebalanced(who holding, mine []*primitive.MessageQueue, others bool) {
	gone, gained := h.note(who, mine)
	if len(gone) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		if err := h.unlock(ctx, who, gone); err != nil {
			slog.Warn("idemq: could not unlock the queues a rebalance took away; their next owner waits for the broker's lock to expire",
				"group", who.group, "topic", who.topic, "queues", len(gone), "err", err)
		}
	}
	if others && len(gained) > 0 {
		if err := h.lock(who, gained); err != nil {
			slog.Warn("idemq: could not lock the queues a rebalance gave; the client tries at this rebalance and the next",
				"group", who.group, "topic", who.topic, "queues", len(gained), "err", err)
		}
	}
}

// note records that the consumer of who is given mine now, and returns the
// queues it was given last time and is not now, and those it was not.
func (h *handBack) note(who holding, mine []*primitive.MessageQueue) (gone, gained []*primitive.MessageQueue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := make(map[primitive.MessageQueue]bool, len(h.held[who]))
	for _, mq := range h.held[who] {
		was[*mq] = true
	}
	for _, mq := range mine {
		if !was[*mq] {
			gained = append(gained, mq)
		}
		delete(was, *mq)
	}
	for mq := range was {
		gone = append(gone, &mq)
	}
	h.held[who] = mine
	return gone, gained
}

// unlock unlocks mqs, held by the client of who, at their brokers.
func (h *handBack) unlock(ctx context.Context, who holding, mqs []*primitive.MessageQueue) error {
	masters, err := h.masters(ctx, who.topic)
	if err != nil {
		return err
	}
	return call(ctx, masters, who, rmqcall.ReqUnlockBatchMQ, mqs, nil)
}

// lock locks mqs for the client of who, trying until all are locked or
// lockWait has passed (their holder has not unlocked them: they are left
// to the client).
func (h *handBack) lock(who holding, mqs []*primitive.MessageQueue) error {
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	masters, err := h.masters(ctx, who.topic)
	if err != nil {
		return err
	}
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		locked := map[primitive.MessageQueue]bool{}
		if err := call(ctx, masters, who, rmqcall.ReqLockBatchMQ, mqs, locked); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mqs = slices.DeleteFunc(mqs, func(mq *primitive.MessageQueue) bool { return locked[*mq] })
		if len(mqs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// call sends the request code (lock or unlock) for mqs, of the client of
// who, to their brokers' masters, the addresses of masters by broker name;
// into locked, if not nil, it puts the queues a lock request locked.
func call(ctx context.Context, masters map[string]string, who holding, code int, mqs []*primitive.MessageQueue, locked map[primitive.MessageQueue]bool) error {
	byBroker := map[string][]*primitive.MessageQueue{}
	for _, mq := range mqs {
		byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], mq)
	}
	var errs []error
	for broker, mqs := range byBroker {
		addr, ok := masters[broker]
		if !ok {
			errs = append(errs, fmt.Errorf("broker %s: no master in the route", broker))
			continue
		}
		body, err := json.Marshal(struct {
			Group    string                    `json:"consumerGroup"`
			ClientID string                    `json:"clientId"`
			MQs      []*primitive.MessageQueue `json:"mqSet"`
		}{who.group, who.clientID, mqs})
		if err != nil {
			return err
		}
		resp, err := rmqcall.Call(ctx, addr, code, nil, body)
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %s at %s: %w", broker, addr, err))
			continue
		}
		if locked == nil {
			continue
		}
		var answer struct {
			MQs []primitive.MessageQueue `json:"lockOKMQSet"`
		}
		if err := json.Unmarshal(resp, &answer); err != nil {
			errs = append(errs, fmt.Errorf("broker %s at %s: the locked queues: %w", broker, addr, err))
		}
		for _, mq := range answer.MQs {
			locked[mq] = true
		}
	}
	return errors.Join(errs...)
}

// masters asks the name servers, in turn until one answers, for the master
// of each broker that serves topic.
func (h *handBack) masters(ctx context.Context, topic string) (map[string]string, error) {
	var errs []error
	for _, ns := range h.resolver.Resolve() {
		masters, err := rmqcall.Masters(ctx, ns, topic)
		if err == nil {
			return masters, nil
		}
		errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no name server")
	}
	return nil, errors.Join(errs...)
}
