package consumer

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// AcceptShortRetention lets [New] take a retention
// ([dedupe.GuardConfig.Retention]) shorter than the group's redelivery
// horizon, which it refuses otherwise (see the package doc's Retention
// section): a redelivery that comes after its key's record expired runs
// the handler again. For tests and benchmarks that expire records on
// purpose, and for a retention sized from a retry policy New is not told
// (a 5.x group's exponential one). Default off.
func AcceptShortRetention() Option {
	return optionFunc(func(o *options) { o.shortRetention = true })
}

// redeliveryHorizon is how long the broker may go on redelivering a message
// after its first delivery, counting its delays alone: the sum of the
// delays of reconsumes 1 to maxReconsume, the k-th at delay level k+2 of
// levels (level 1 first), the last level once k+2 passes it. That is the
// broker's rule for a message sent back without a delay level, as
// rocketmq-client-go sends a failed one (AbstractSendMessageProcessor's
// consumerSendMsgBack: level 3 + reconsumeTimes, which counts k-1 before
// the k-th reconsume; the store clamps a level past the last), and a 5.x
// group's default retry policy's (CustomizedRetryPolicy: index
// reconsumeTimes + 2 from 0). The result saturates at the longest
// time.Duration.
func redeliveryHorizon(maxReconsume int32, levels []time.Duration) time.Duration {
	var h time.Duration
	k := int64(1)
	for ; k <= int64(maxReconsume) && int(k)+1 < len(levels); k++ {
		h += levels[k+1]
	}
	// The rest wait the last level each; counted at once, as orderly
	// consumers may allow math.MaxInt32 reconsumes.
	rest, last := int64(maxReconsume)-k+1, int64(levels[len(levels)-1])
	if rest <= 0 {
		return h
	}
	if rest > (math.MaxInt64-int64(h))/last {
		return math.MaxInt64
	}
	return h + time.Duration(rest*last)
}

// checkRetention refuses a retention shorter than the redelivery horizon
// of o's group, unless o accepts the risk.
func (o *options) checkRetention(retention time.Duration) error {
	h := redeliveryHorizon(o.maxReconsume, o.delayLevels)
	if retention >= h || o.shortRetention {
		return nil
	}
	levels := "RocketMQ's delay levels"
	if !slices.Equal(o.delayLevels, defaultDelayLevels) {
		levels = "the delay levels of consumer.WithDelayLevels"
	}
	return fmt.Errorf("consumer: retention %v is shorter than the group's redelivery horizon %v (%d reconsumes over %s): "+
		"a retry after the record expired would run the handler again; "+
		"set a retention (dedupe.GuardConfig.Retention) of at least %v, or lower the max reconsumes (the client's, and consumer.WithMaxReconsumeTimes), "+
		"or pass consumer.AcceptShortRetention()",
		retention, h, o.maxReconsume, levels, h)
}
