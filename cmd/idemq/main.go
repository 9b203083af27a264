// Command idemq generates and decodes IDs, inspects and repairs dedupe
// stores, lists worker-id leases, manages segment tags, inspects and
// repairs transactional outbox tables and ships their rows to RocketMQ,
// reports what became of one message key across all of these and the broker,
// serves IDs over HTTP and creates the SQL tables of all of these.
//
// Usage:
//
//	idemq id new --node N [--layout L] [--count K] [--format dec|base32|base62]
//	idemq id new --lease-store URL --pool P [--layout L] [--count K]
//	idemq id decode [--layout L] ID...
//	idemq id layouts
//	idemq dedupe get --store URL --group G KEY...
//	idemq dedupe list --store URL --group G [--prefix P] [--limit N] [--cursor C | --all]
//	idemq dedupe stats --store URL --group G
//	idemq dedupe forget --store URL --group G [--yes-reprocess] KEY...
//	idemq workers list --store URL --pool P
//	idemq workers create --store URL --pool P [--layout L | --pool-size N] [--lease D]
//	idemq segment show --store URL [TAG]
//	idemq segment create --store URL TAG --step N [--start S] [--max M] [--description D]
//	idemq segment set-max --store URL TAG MAX
//	idemq serve --listen ADDR [--store URL] [--node N | --lease-store URL --pool P]
//	idemq outbox stats --store URL
//	idemq outbox list --store URL [--state pending|sent|parked] [--after ID] [--limit N]
//	idemq outbox retry --store URL (--all | ID...)
//	idemq outbox park --store URL [--reason R] (--all | ID...)
//	idemq key [--outbox URL] [--store URL --group G...] [--namesrv ADDR [--topic T...]] KEY
//	idemq relay --store URL (--namesrv ADDR | --proxy ADDR) [--table T] [--batch N] [--concurrency N]
//	idemq migrate --store URL (--dedupe | --workers | --segments | --outbox | --all)
//	idemq version
//
// Every command takes --help, and --json to print one JSON document instead
// of a table. Flags may follow arguments; "--" ends the flags. A store is a
// URL (redis://, rediss://, mysql://, postgres://, sqlite:) given by --store
// or the environment variable IDEMQ_STORE; there is no default.
//
// Exit status:
//
//	0  success
//	1  failure: a store unreachable or refusing, a record or tag not found
//	2  usage error: unknown command or flag, missing or malformed argument,
//	   store URL or key, or a forget without --yes-reprocess
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	// go-redis logs failed dials itself; the command's error says it once.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `idemq: IDs and idempotent RocketMQ consumption.

Usage:
  idemq <command> [<subcommand>] [flags] [args]

Commands:
  id        generate (new), decode and describe (layouts) snowflake IDs
  dedupe    inspect a dedupe store: get, list, stats; forget records to reprocess them
  workers   list the leases of a worker-id pool; create a Redis pool
  segment   show, create and cap segment tags (Leaf's segment mode)
  outbox    inspect a transactional outbox table: stats, list; retry and park rows
  relay     ship an outbox table's rows to RocketMQ
  key       one message key's outbox rows, dedupe records and broker copies
  serve     serve IDs over HTTP
  migrate   create the SQL tables of dedupe records, worker-id leases, segment tags and outboxes
  version   print the module version and the Go release that built it

Every command takes --help, and --json for one JSON document instead of a table;
'idemq --version' is 'idemq version'.
Stores are URLs given by --store or $IDEMQ_STORE: redis://, rediss://, mysql://,
postgres://, sqlite:. There is no default store.

Exit status: 0 success, 1 failure, 2 usage error.
`

// run runs the command line args (without the program name) and returns the
// exit status. Only main calls os.Exit, so tests call run in process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var cmd func(context.Context, *env, []string) error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "id":
		cmd = idCmd
	case "dedupe":
		cmd = dedupeCmd
	case "workers":
		cmd = workersCmd
	case "segment":
		cmd = segmentCmd
	case "outbox":
		cmd = outboxCmd
	case "key":
		cmd = keyCmd
	case "migrate":
		cmd = migrateCmd
	case "version", "--version":
		cmd = versionCmd
	case "serve":
		return serveCmd(ctx, args[1:], stdout, stderr)
	case "relay":
		return relayCmd(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "idemq: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return report(cmd(ctx, &env{stdin: stdin, stdout: stdout}, args[1:]), stderr)
}

// report prints err, if any, and returns the exit status it calls for.
func report(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "idemq: %v\n", err)
		if ue.help != "" {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", ue.help)
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "idemq: %v\n", err)
		return exitFailure
	}
}

// quietLogger discards go-redis's own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
