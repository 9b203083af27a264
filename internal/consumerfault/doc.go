// Package consumerfault tests package consumer, through its remoting and
// gRPC adapters, against the faults one process cannot stage: a consumer
// killed with SIGKILL while it holds message keys, and a consumer group
// restarted process by process while messages keep coming.
//
// Each test runs consumers as child processes (the package's test binary
// run again in a role), a producer in the parent, a real RocketMQ broker
// and a real Redis dedupe store, and its handlers apply a visible effect:
// a count per message key in a Redis hash, the ledger. At the end it counts
// exactly which messages were lost — never applied, or dead-lettered to
// %DLQ%<group> — and which were applied more than once.
//
// The package exports nothing; everything lives in its _test.go files.
package consumerfault
