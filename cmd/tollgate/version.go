package main

import (
	"fmt"
	"runtime/debug"
)

// version overrides the module version when set at build time with
// -ldflags "-X main.version=...".
var version = ""

// versionString is `tollgate version`: the module version and the VCS
// revision, time and dirty flag Go stamps into the binary's build info.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tollgate " + orDefault(version, "(devel)") + " (no build info)"
	}
	return formatVersion(bi, version)
}

func formatVersion(bi *debug.BuildInfo, override string) string {
	v := orDefault(override, orDefault(bi.Main.Version, "(devel)"))
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	out := "tollgate " + v
	if rev := settings["vcs.revision"]; rev != "" {
		out += " revision " + rev
		if settings["vcs.modified"] == "true" {
			out += " (modified)"
		}
		if t := settings["vcs.time"]; t != "" {
			out += " " + t
		}
	}
	return fmt.Sprintf("%s %s", out, bi.GoVersion)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
