package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

// env is what a command reads and writes besides its arguments.
type env struct {
	stdin  io.Reader
	stdout io.Writer
}

// A usageError is a command line that cannot run: exit status 2.
type usageError struct {
	err error
	// help is the command whose --help explains the mistake, if any.
	help string
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, a ...any) error {
	return usageError{err: fmt.Errorf(format, a...)}
}

// errHelp reports that a command printed its help: exit status 0.
var errHelp = errors.New("help printed")

// A subcommand is one command of a group such as "idemq id".
type subcommand struct {
	name, summary string
	run           func(context.Context, *env, []string) error
}

// dispatch runs the subcommand args[0] of the group path.
func dispatch(ctx context.Context, e *env, path, about string, subs []subcommand, args []string) error {
	help := func(w io.Writer) {
		fmt.Fprintf(w, "%s\n\nUsage:\n  %s <subcommand> [flags] [args]\n\nSubcommands:\n", about, path)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, s := range subs {
			fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.summary)
		}
		tw.Flush()
		fmt.Fprintf(w, "\nRun '%s <subcommand> --help' for its flags.\n", path)
	}
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	name := strings.TrimPrefix(path, "idemq ")
	if len(args) == 0 {
		return usageError{fmt.Errorf("%s: missing subcommand: want one of %s", name, strings.Join(names, ", ")), path}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		help(e.stdout)
		return errHelp
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	return usageError{fmt.Errorf("%s: unknown subcommand %q: want one of %s", name, args[0], strings.Join(names, ", ")), path}
}

// flags is the flag set of one subcommand, with the flags every subcommand
// has: --json and --timeout.
type flags struct {
	*flag.FlagSet
	path, synopsis, doc string
	json                *bool
	timeout             *time.Duration
}

// newFlags returns the flag set of the subcommand path ("idemq id new"),
// whose --help prints synopsis (the arguments after path) and doc.
func newFlags(path, synopsis, doc string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(path, flag.ContinueOnError), path: path, synopsis: synopsis, doc: doc}
	f.SetOutput(io.Discard)
	f.json = f.Bool("json", false, "print one JSON document instead of a table")
	f.timeout = f.Duration("timeout", 30*time.Second, "give up after `D`")
	return f
}

// parse parses args, flags and arguments in any order ("--" ends the flags),
// and returns the arguments. --help prints the usage and returns errHelp.
func (f *flags) parse(e *env, args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.usage(e.stdout)
				return nil, errHelp
			}
			return nil, f.usageErr("%s", doubleDash(err.Error()))
		}
		rest := f.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usage prints the subcommand's help to w.
func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n\nFlags:\n", f.path, f.synopsis, strings.TrimSpace(f.doc))
	f.printDefaults(w)
	fmt.Fprint(w, "\nExit status: 0 success, 1 failure, 2 usage error.\n")
}

// printDefaults prints the flags as PrintDefaults does, but with the double
// dash the command's synopses, documentation and docs/cli.md use: the flag
// package takes either and prints one dash.
func (f *flags) printDefaults(w io.Writer) {
	f.VisitAll(func(fl *flag.Flag) {
		name, usage := flag.UnquoteUsage(fl)
		fmt.Fprintf(w, "  --%s", fl.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch fl.DefValue {
		case "", "false", "0", "0s":
		default:
			if g, ok := fl.Value.(flag.Getter); ok {
				if _, ok := g.Get().(string); ok {
					fmt.Fprintf(w, " (default %q)", fl.DefValue)
					break
				}
			}
			fmt.Fprintf(w, " (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// doubleDash rewrites the flag package's error messages, which name a flag
// with one dash ("flag provided but not defined: -nodes"), to the double
// dash the help shows.
func doubleDash(msg string) string {
	return flagNameRE.ReplaceAllString(msg, "$1--$2")
}

// flagNameRE finds a flag name in the flag package's errors: after "flag",
// "for" or a colon, one dash and a letter.
var flagNameRE = regexp.MustCompile(`((?:^|flag|for|:) )-([A-Za-z])`)

// usageErr returns a usageError that points at the subcommand's help.
func (f *flags) usageErr(format string, a ...any) error {
	return usageError{fmt.Errorf(strings.TrimPrefix(f.path, "idemq ")+": "+format, a...), f.path}
}

// context returns ctx bounded by --timeout.
func (f *flags) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if *f.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, *f.timeout)
}

// emit prints v as one JSON document under --json, and otherwise the table
// that table writes, its columns aligned.
func (f *flags) emit(e *env, v any, table func(w io.Writer)) error {
	if *f.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// timeFormat prints times: UTC, RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// fmtTime formats t in UTC with milliseconds, or "-" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeFormat)
}
