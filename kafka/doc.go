// Package kafka holds everything idemq needs for Apache Kafka through
// franz-go (github.com/twmb/franz-go/pkg/kgo): a producer that stamps
// keys, a group consumer whose handler runs at most once per message key,
// its drain, the outbox's sender and the client's log routing. It is a
// module of its own, so that a program on RocketMQ gains nothing of Kafka
// in its go.sum, and the reverse.
//
// # Sending
//
// [Producer] wraps a *kgo.Client so that every record is stamped with its
// idempotency key before its first produce, in a header named
// msgkey.Property ("IDEMQ_KEY"): a key the caller set is kept, and every
// retry of the record carries the same one. The record's own Key, which
// picks its partition, is the caller's and is left alone.
//
// [OutboxSender] ships an outbox's rows, which carry their keys, through a
// plain *kgo.Client: the outbox.BatchSender a relay takes. A row's
// ordering key is its record's Key, so each key's rows stay in one
// partition, in order.
//
// # Consuming
//
// [NewReceiver] makes the group's client from the caller's options and
// adds its own; [Receiver.Run] polls, and [Receiver.Drain] stops. Each
// assigned partition has a goroutine that runs its records, in offset
// order, through [consumer.Consumer]'s one path (the partitions run at
// once), and does with each what its verdict says:
//
//   - acknowledged (run, or suppressed as a duplicate): its offset is marked,
//     and committed once every record before it is too (franz-go's
//     kgo.AutoCommitMarks, every 5 s by default, and on a revoke and a
//     drain, synchronously); nothing is committed for a record that is not
//     acknowledged;
//   - to retry (the handler failed, the key was reused for another body):
//     it runs again in this process, after the Consumer's delay for its
//     attempt (1 s, 5 s, 10 s, 30 s, … by default: consumer.WithDelayLevels),
//     and the records behind it wait: Kafka has no per-record redelivery,
//     and a retry topic would let a key's later records pass its failed one
//     (and lose the failed one if the process died between producing the
//     copy and committing the original, unless both were one transaction).
//     Holding the partition back loses nothing: the offset stays
//     uncommitted until the record is acknowledged, so whoever owns the
//     partition next runs it again. A record's consumer.Message.Reconsumed
//     counts its attempts in this process; consumer.WithMaxReconsumeTimes
//     does not end them, since nothing would take the record afterwards:
//     a record that fails for ever stops its partition, and the Consumer
//     logs each failure and counts it in Stats.Failed;
//   - held (a drain, a revoke; the context ended): not committed; the
//     partition's next owner gets it, without an attempt spent.
//
// A key that another consumer holds, and a dedupe store that is down, are
// waited for in process however long it takes (a held record spends
// nothing, and the client keeps heartbeating meanwhile, so the session does
// not end); a revoke ends the wait at once, the record held.
//
// A record without a key is retried like a failed one: it stops its
// partition until a deploy fixes it. Where records may lack one, give the
// Consumer a fallback: the consumer.Message.ID of a record is
// "topic/partition/offset", the same on every delivery of the stored
// record (but not for a record produced twice, which is stored twice):
//
//	consumer.WithKeyFallback(func(m *consumer.Message) string { return m.ID })
//
// # Rebalances
//
// The Receiver uses kgo.BlockRebalanceOnPoll only to hand a poll's records
// to their partitions' goroutines; it allows the rebalance again at once,
// and the partitions are drained in OnPartitionsRevoked instead: the
// revoked partitions take no more records, a record waiting (for a key, the
// store or a retry's delay) is handed back at once, a running handler has
// half the group's rebalance timeout (kgo.RebalanceTimeout, 60 s by
// default) to finish before its context is cancelled, and then what was
// acknowledged is committed, synchronously, before the rebalance goes on.
// Set kgo.RebalanceTimeout to more than twice your longest handler. A
// commit that fails because this member was fenced (ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS) is logged: the partition's next owner runs its
// records again from the last commit, and the dedupe store suppresses
// those that ran here. Lost partitions (OnPartitionsLost: the session
// ended) are stopped at once, their handlers' contexts cancelled, and
// nothing of theirs is committed.
//
// # Retention
//
// A record is redelivered only when its offset was not committed: an
// acknowledged record whose commit had not happened when its consumer died
// (up to the commit interval before), or one held by a rebalance or a
// drain. Its copy comes as soon as another member owns the partition, so
// the dedupe store's retention (dedupe.GuardConfig.Retention, 72 h by
// default) need only cover how long a partition may go unowned: keep it
// over that, and under nothing else. The Consumer's own check of the
// retention against RocketMQ's redelivery horizon (delay levels × max
// reconsumes) holds as it is.
//
// # Logs
//
// franz-go logs nothing by default. A Receiver routes its client's log to
// its Consumer's logger at WARN and above ([NewLogger]); give a producer's
// client kgo.WithLogger(kafka.NewLogger(logger)).
package kafka
