package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

// promtool returns the path of promtool, from Debian's prometheus package
// (internal/testenv/install-deps.sh installs it); without it the test is
// skipped, or fails under CI=true.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, "promtool: install Debian's prometheus package (apt-get install prometheus)")
	}
	return p
}

// runPromtool runs promtool with args and fails t unless it succeeds.
func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRules checks alerts.yml with promtool and runs its unit tests,
// alerts_test.yml: each alert fires on its signal and is quiet otherwise.
func TestAlertRules(t *testing.T) {
	runPromtool(t, "check", "rules", "alerts.yml")
	runPromtool(t, "test", "rules", "alerts_test.yml")
}

// dashboard is what the tests read of dashboard.json.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardExprs returns the PromQL of every panel of dashboard.json, and
// the metric its template variable reads, after checking that it is JSON
// whose panels have distinct ids and queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(src, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var exprs []string
	var ids []int
	for _, p := range d.Panels {
		if slices.Contains(ids, p.ID) {
			t.Errorf("dashboard.json: panel id %d twice", p.ID)
		}
		ids = append(ids, p.ID)
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard.json: panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		m, ok := strings.CutPrefix(v.Definition, "label_values(")
		m, _, ok2 := strings.Cut(m, ",")
		if !ok || !ok2 {
			t.Errorf("dashboard.json: variable %s is not label_values(metric, label)", v.Name)
		}
		exprs = append(exprs, m)
	}
	if d.UID == "" || len(exprs) < 10 {
		t.Fatalf("dashboard.json: uid %q, %d queries: the parsing is off", d.UID, len(exprs))
	}
	return exprs
}

// TestDashboardQueries checks that every query of dashboard.json is PromQL
// Prometheus parses, with Grafana's variables given values: promtool checks
// them as the expressions of recording rules.
func TestDashboardQueries(t *testing.T) {
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$group", ".*")
	for i, e := range dashboardExprs(t) {
		q, err := json.Marshal(grafana.Replace(e)) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", i, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", file)
}
