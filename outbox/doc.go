// Package outbox is a transactional outbox for RocketMQ: a service writes
// its messages into a table in the same SQL transaction as its business
// rows ([Outbox.Add]), and a [Relay] ships them to the broker once that
// transaction commits. A state change and its message are one act: a
// rolled-back transaction ships nothing, a committed one ships all its
// messages, whatever crashes in between.
//
// # Keys
//
// Every message is stamped with its idempotency key when it is added, by
// the rule and from the sources the producer uses (package msgkey): the
// key is fixed before the first send, and every shipment of the row
// carries it. The relay ships at least once — a relay that dies after the
// broker stored a message but before it marked the row ships it again — and
// a consumer of package consumer applies each key once, so outbox and
// consumer together give each state change and its downstream effect once.
//
// # Order
//
// Rows with the same [Message.OrderingKey] ship in the order they were
// added; a row that fails holds back the later rows of its key, not of other
// keys, until its backoff ends. Order is the order of the rows' inserts:
// transactions that add rows of one key at the same time should serialize
// on the aggregate (they usually lock its row). A parked row no longer
// holds its key back.
//
// # Relays
//
// Any number of relays, in one process or many, share a table. A relay
// claims a batch of rows under a lease with an owner token; claims are
// serialized (a PostgreSQL advisory lock, a MySQL named lock, SQLite's
// single writer) and every mark of a row is fenced by the token, so no two
// live relays ship a row at the same time. A relay that dies leaves its
// rows leased until the lease ends; another takes them then. A relay that
// stops inside a claim (SIGSTOP, a frozen VM) holds the claim lock for a
// fifth of its lease, at least a second: MySQL and PostgreSQL then end the
// claim's session, and the stopped relay's claim fails when it wakes. On
// SQLite a process stopped inside a write holds the database's one write
// lock, and every writer waits for it. A claim or a
// mark that the database rolls back to break a deadlock (relays' marks of
// different rows meet so on MariaDB) runs again.
//
// An idle relay polls the table ([RelayConfig].PollInterval); on
// PostgreSQL, package outbox/pgwake wakes it by LISTEN/NOTIFY as soon as
// rows are committed ([RelayConfig].Wake).
//
// A relay whose Sender is a [BatchSender] ships many rows a call: the rows
// of a claim without an ordering key go by topic, and each ordering key's
// rows in order, in batches the broker stores whole or not at all. A
// failed batch is retried with a backoff as its rows would have been one
// by one, and a row that failed before is sent alone.
//
// # Poison rows
//
// A message the broker refuses for good (the [Sender] wraps [ErrRefused])
// is parked with its reason and counted ([Relay.Stats]), and the rows
// after it flow on. A refused batch is sent again row by row, so that only
// the row the broker refuses alone is parked. Input that can never ship is
// refused by Add itself.
//
// The package links no RocketMQ client: remoting.OutboxSender and
// grpcv5.OutboxSender implement [Sender] over each client.
package outbox
