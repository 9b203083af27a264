package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionDoc = `Print the version of the idemq module the binary was built from and the Go
release that built it. A binary built by 'go install ...@VERSION' knows its
module version; one built in a checkout shows (devel) and, when the build
recorded it, the commit.`

// buildVersion is what version prints.
type buildVersion struct {
	// Version is the module version, or "(devel)".
	Version string `json:"version"`
	// Revision is the VCS commit of a (devel) build, when recorded.
	Revision string `json:"revision,omitempty"`
	// Modified is whether that checkout had uncommitted changes.
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// readVersion reads the binary's build information.
func readVersion() buildVersion {
	v := buildVersion{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCmd(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq version", "[--json]", versionDoc)
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	v := readVersion()
	return f.emit(e, v, func(w io.Writer) {
		fmt.Fprintf(w, "idemq %s", v.Version)
		if v.Revision != "" {
			fmt.Fprintf(w, " (commit %s", v.Revision)
			if v.Modified {
				fmt.Fprint(w, ", modified")
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintf(w, " %s %s\n", v.Go, v.Platform)
	})
}
