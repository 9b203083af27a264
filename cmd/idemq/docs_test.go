package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// guide is the page whose section on the command TestCLIGuide checks.
const guide = "../../docs/cli.md"

// TestCLIGuide checks the CLI guide's section on the command against it:
// the help shown is the command's, a decoded ID shows what decode prints,
// and every command line shown takes the flags it names.
func TestCLIGuide(t *testing.T) {
	page, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## The `idemq` command\n")
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)\n```\n(.*?)```").FindAllStringSubmatch(section, -1)
	if !ok || len(blocks) == 0 {
		t.Fatal("docs/cli.md has no section on the idemq command with a transcript")
	}
	commands := 0
	for _, b := range blocks {
		lines := strings.Split(strings.TrimSuffix(b[1], "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			line, ok := strings.CutPrefix(lines[i], "$ ")
			if !ok {
				t.Fatalf("docs/cli.md transcript line outside a command's output: %q", lines[i])
			}
			var shown []string
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
				i++
				shown = append(shown, lines[i])
			}
			if strings.HasPrefix(line, "export ") {
				continue
			}
			args := shellWords(t, line)
			if len(args) == 0 || args[0] != "idemq" {
				t.Errorf("docs/cli.md transcript runs %q, not idemq", line)
				continue
			}
			args = args[1:]
			commands++
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				// --help after the rest: every flag before it must parse.
				if r := inProcess(t, "", append(args, "--help")...); r.code != 0 {
					t.Errorf("docs/cli.md's '%s' does not parse: %v", line, r)
				}
				deterministic := args[0] == "--help" || len(args) > 1 && args[0] == "id" && args[1] == "decode"
				if len(shown) == 0 || !deterministic {
					return
				}
				want := strings.Join(shown, "\n") + "\n"
				if r := inProcess(t, "", args...); r.code != 0 || r.stdout != want {
					t.Errorf("docs/cli.md shows for '%s':\n%s\nthe command prints: %v", line, want, r)
				}
			})
		}
	}
	if commands < 10 {
		t.Errorf("docs/cli.md's transcript shows %d idemq commands; the test found too few to trust its parsing", commands)
	}
}

// shellWords splits a shell command line into words: double quotes group,
// and "#" at the start of a word begins a comment.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '"':
			quoted = false
		case quoted:
			w.WriteRune(r)
		case r == '"':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", line)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
