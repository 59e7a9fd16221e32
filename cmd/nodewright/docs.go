package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newDocsCommand prints docs/configuration.md: every command's flags, read
// from the command tree itself, so the reference cannot fall behind
// (a test compares it with the file).
func newDocsCommand(root func() *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "docs",
		Short:  "Print the configuration reference (docs/configuration.md) generated from the flags",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeConfigurationReference(cmd.OutOrStdout(), withoutFlagEnv(root))
		},
	}
}

var envInUsage = regexp.MustCompile(`\s*\(env ([A-Z_]+)(?:; ([^)]*))?\)`)

// writeConfigurationReference writes one table per command: flag, the
// environment variable that sets it, its default, and what it does.
func writeConfigurationReference(w io.Writer, root *cobra.Command) error {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from the commands' flags by `go run ./cmd/nodewright docs > docs/configuration.md`; a test\n")
	b.WriteString("fails when this file and the flags disagree. A flag wins over its environment variable.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c != root && c.Runnable() {
			fmt.Fprintf(&b, "\n## `%s`\n\n%s.\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."))
			var rows []string
			c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" {
					return
				}
				usage, env := f.Usage, ""
				if m := envInUsage.FindStringSubmatch(usage); m != nil {
					env = "`" + m[1] + "`"
					rest := ""
					if m[2] != "" {
						rest = " (" + m[2] + ")"
					}
					usage = strings.TrimSpace(envInUsage.ReplaceAllLiteralString(usage, rest))
				}
				def := f.DefValue
				if f.Value.Type() == "stringArray" && def == "[]" {
					def = ""
				}
				if def != "" {
					def = "`" + def + "`"
				}
				name := "`--" + f.Name + "`"
				if f.Shorthand != "" {
					name = "`-" + f.Shorthand + "`, " + name
				}
				rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", name, env, def, strings.ReplaceAll(usage, "|", "\\|")))
			})
			if len(rows) == 0 {
				b.WriteString("\nNo flags.\n")
			} else {
				b.WriteString("\n| flag | env | default | |\n|---|---|---|---|\n")
				b.WriteString(strings.Join(rows, "\n") + "\n")
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	_, err := io.WriteString(w, b.String())
	return err
}

// withoutFlagEnv builds the command tree with the environment variables
// its flags read unset, so the defaults documented are the built-in ones,
// whatever this shell has set; the environment is restored after.
func withoutFlagEnv(build func() *cobra.Command) *cobra.Command {
	var names []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if m := envInUsage.FindStringSubmatch(f.Usage); m != nil {
				names = append(names, m[1])
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(build())
	saved := map[string]string{}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			saved[n] = v
			_ = os.Unsetenv(n)
		}
	}
	defer func() {
		for n, v := range saved {
			_ = os.Setenv(n, v)
		}
	}()
	return build()
}
