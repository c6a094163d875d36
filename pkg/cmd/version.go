package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
)

// Stamped by the Makefile with -ldflags "-X ...".
var (
	version = "v0.0.0-dev"
	commit  = "unknown"
)

// UserAgent is sent with every request: kubectl-gobrave/<version>.
func UserAgent() string { return "kubectl-gobrave/" + version }

// VersionInfo is the -o json form of the version verb.
type VersionInfo struct {
	Version       string `json:"version"`
	GitCommit     string `json:"gitCommit"`
	GoVersion     string `json:"goVersion"`
	Platform      string `json:"platform"`
	ServerVersion string `json:"serverVersion,omitempty"`
	ServerError   string `json:"serverError,omitempty"`
}

// VersionOptions are the options of the version verb.
type VersionOptions struct {
	genericiooptions.IOStreams
	f      *Factory
	Output string
	Client bool
}

// NewCmdVersion prints the plugin's version and, when reachable, the server's.
func NewCmdVersion(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin version, git commit, Go version and the server version",
		Example: `  kubectl gobrave version
  kubectl gobrave version --client -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(o.Output, "", "json", "yaml"); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json or yaml")
	cmd.Flags().BoolVar(&o.Client, "client", o.Client, "Print the client version only (no API request)")
	return cmd
}

// Run prints the version.
func (o *VersionOptions) Run(ctx context.Context) error {
	info := VersionInfo{Version: version, GitCommit: commit, GoVersion: goruntime.Version(), Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
	if !o.Client {
		if sv, err := o.serverVersion(ctx); err != nil {
			info.ServerError = err.Error()
		} else {
			info.ServerVersion = sv
		}
	}
	switch o.Output {
	case "json", "yaml":
		return printData(o.Out, o.Output, info)
	}
	fmt.Fprintf(o.Out, "Client Version: %s\nGit Commit: %s\nGo Version: %s\nPlatform: %s\n", info.Version, info.GitCommit, info.GoVersion, info.Platform)
	if info.ServerVersion != "" {
		fmt.Fprintf(o.Out, "Server Version: %s\n", escapeTerminal(info.ServerVersion))
	} else if !o.Client {
		fmt.Fprintf(o.ErrOut, "warning: server version unavailable: %s\n", escapeTerminal(info.ServerError))
	}
	return nil
}

func (o *VersionOptions) serverVersion(ctx context.Context) (string, error) {
	rt, err := o.f.Runtime()
	if err != nil {
		return "", err
	}
	c, err := o.f.Client(rt)
	if err != nil {
		return "", err
	}
	return serverVersion(ctx, c, 5*time.Second)
}

// serverVersion asks the API server for its version, giving up after
// timeout (discovery calls take no context).
func serverVersion(ctx context.Context, c kubernetes.Interface, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		v   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := c.Discovery().ServerVersion()
		if err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{v: v.GitVersion}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("no answer from the API server%s within %s: timed out", runtime.ServerAt(c), timeout)
	}
}

// printData prints v as indented JSON or YAML.
func printData(w interface{ Write([]byte) (int, error) }, format string, v any) error {
	switch format {
	case "yaml":
		b, err := yamlMarshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	default:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
}
