package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// DefaultPodRunningTimeout is kubectl port-forward's default.
const DefaultPodRunningTimeout = time.Minute

// PortForwardOptions are the options of port-forward.
type PortForwardOptions struct {
	genericiooptions.IOStreams
	f                 *Factory
	Address           []string
	PodRunningTimeout time.Duration
	// Dialer opens the connection to a pod's portforward subresource;
	// tests replace it. Nil is DefaultPortForwardDialer.
	Dialer func(u *url.URL, cfg *rest.Config) (httpstream.Dialer, error)
	arg    string
	ports  []forwardPort
}

// forwardPort is one [LOCAL:]REMOTE argument; Local 0 picks a free port.
type forwardPort struct {
	Local, Remote uint16
}

func (p forwardPort) String() string { return fmt.Sprintf("%d:%d", p.Local, p.Remote) }

// NewCmdPortForward forwards local ports to a workload's pod.
func NewCmdPortForward(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PortForwardOptions{IOStreams: streams, f: f, Address: []string{"localhost"}, PodRunningTimeout: DefaultPodRunningTimeout}
	cmd := &cobra.Command{
		Use:   "port-forward ID [LOCAL:]REMOTE...",
		Short: "Forward local ports to a workload's pod, following it when it is replaced",
		Long: `Forward local ports to the newest running, ready pod owned by a workload (the Job's, or a
ReplicaSet's of the Deployment), as kubectl port-forward does (WebSocket, falling back to SPDY).

When that pod is replaced (a restart, a rollout, a crash) or the connection to it is lost,
port-forward moves to the workload's new running, ready pod on the same local ports and
prints one line saying so; connections made while it moves are refused. It waits up to
--pod-running-timeout for a pod, at the start and after each replacement, then exits 1.
Ctrl-C ends it with exit 0.

A port is REMOTE (the same port locally), LOCAL:REMOTE, or :REMOTE (a free local port,
kept across reconnects).`,
		Example: `  kubectl gobrave port-forward web 8080:80
  kubectl gobrave port-forward web :80 9090 --address 127.0.0.1
  kubectl gobrave port-forward k8s-default|deployment|api 5432 --pod-running-timeout 5m`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.arg = args[0]
			if err := o.Validate(args[1:]); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringSliceVar(&o.Address, "address", o.Address, "Addresses to listen on (comma separated): localhost or IP addresses")
	cmd.Flags().DurationVar(&o.PodRunningTimeout, "pod-running-timeout", o.PodRunningTimeout, "How long to wait for a running, ready pod, at the start and after the pod is replaced")
	return cmd
}

// parsePortSpec parses [LOCAL:]REMOTE.
func parsePortSpec(s string) (forwardPort, error) {
	local, remote, hasLocal := strings.Cut(s, ":")
	if !hasLocal {
		local, remote = s, s
	}
	bad := func(why string) (forwardPort, error) {
		return forwardPort{}, usageErrorf("port %q: %s (use REMOTE, LOCAL:REMOTE or :REMOTE with numbers, e.g. 8080:80)", s, why)
	}
	r, err := strconv.ParseUint(remote, 10, 16)
	if err != nil || r == 0 {
		return bad(fmt.Sprintf("remote port %q is not a number from 1 to 65535", remote))
	}
	var l uint64
	if local != "" {
		l, err = strconv.ParseUint(local, 10, 16)
		if err != nil {
			return bad(fmt.Sprintf("local port %q is not a number from 0 to 65535", local))
		}
	}
	return forwardPort{Local: uint16(l), Remote: uint16(r)}, nil
}

// Validate checks the arguments and flags without I/O.
func (o *PortForwardOptions) Validate(ports []string) error {
	if err := ParseRef(o.arg); err != nil {
		return err
	}
	if o.PodRunningTimeout <= 0 {
		return usageErrorf("--pod-running-timeout %s must be above zero, e.g. 1m", o.PodRunningTimeout)
	}
	if len(o.Address) == 0 {
		return usageErrorf("--address is empty: use localhost or an IP address")
	}
	for _, a := range o.Address {
		if a != "localhost" && net.ParseIP(a) == nil {
			return usageErrorf("--address %q: use localhost or an IP address such as 127.0.0.1", a)
		}
	}
	o.ports = nil
	locals := map[uint16]string{}
	for _, s := range ports {
		p, err := parsePortSpec(s)
		if err != nil {
			return err
		}
		if p.Local != 0 {
			if prev, dup := locals[p.Local]; dup {
				return usageErrorf("ports %q and %q both listen on local port %d: give each its own", prev, s, p.Local)
			}
			locals[p.Local] = s
		}
		o.ports = append(o.ports, p)
	}
	return nil
}

// Run forwards until Ctrl-C.
func (o *PortForwardOptions) Run(ctx context.Context) error {
	_, ws, err := o.f.resolveAll(ctx, []string{o.arg})
	if err != nil {
		return err
	}
	id, err := runtimeid.Parse(ws[0].RuntimeID)
	if err != nil {
		return err
	}
	client, err := o.f.Client(id.Runtime)
	if err != nil {
		return err
	}
	ctxName, err := o.f.ContextFor(id.Runtime)
	if err != nil {
		return err
	}
	cfg, err := o.f.RESTConfig(ctxName)
	if err != nil {
		return err
	}
	newDialer := o.Dialer
	if newDialer == nil {
		newDialer = DefaultPortForwardDialer
	}
	var (
		mu    sync.Mutex
		ports = o.ports
		first = true
	)
	out := &lineOut{w: o.Out}
	forward := func(fctx context.Context, pod *corev1.Pod, ready func()) error {
		u, err := portForwardURL(cfg, pod)
		if err != nil {
			return err
		}
		dialer, err := newDialer(u, cfg)
		if err != nil {
			return err
		}
		mu.Lock()
		specs := make([]string, len(ports))
		for i, p := range ports {
			specs[i] = p.String()
		}
		// client-go's own lines ("Forwarding from 127.0.0.1:8080 -> 80",
		// "Handling connection for 8080"); the listening lines only once.
		w := out.stream("", false)
		if !first {
			w = &dropLines{w: w, prefix: []byte("Forwarding from ")}
		}
		first = false
		mu.Unlock()
		defer w.Close()
		readyCh := make(chan struct{})
		pf, err := portforward.NewOnAddressesWithContext(fctx, dialer, o.Address, specs, readyCh, w, o.ErrOut)
		if err != nil {
			return err
		}
		go func() {
			select {
			case <-readyCh:
			case <-fctx.Done():
				return
			}
			// Keep the local ports chosen for :REMOTE across reconnects.
			if got, err := pf.GetPorts(); err == nil && len(got) == len(ports) {
				mu.Lock()
				for i := range got {
					ports[i].Local = got[i].Local
				}
				mu.Unlock()
			}
			ready()
		}()
		return pf.ForwardPorts()
	}
	moved := func(from, to *corev1.Pod, why string) {
		w := out.stream("", false)
		fmt.Fprintf(w, "Forwarding to pod %s of %s: pod %s %s\n", escapeTerminal(to.Name), id, escapeTerminal(from.Name), escapeTerminal(why))
		_ = w.Close()
	}
	rt := runtime.New(client, id.Runtime)
	rt.Warn = func(msg string) { out.warn(o.ErrOut, escapeTerminal(msg)) }
	err = rt.PortForward(ctx, id, ws[0].UID, runtime.ForwardOptions{
		PodRunningTimeout: o.PodRunningTimeout, Moved: moved,
	}, forward)
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	return nil
}

// portForwardURL is the URL of pod's portforward subresource.
func portForwardURL(cfg *rest.Config, pod *corev1.Pod) (*url.URL, error) {
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return c.RESTClient().Post().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("portforward").URL(), nil
}

// DefaultPortForwardDialer is kubectl's: SPDY tunnelled over a WebSocket,
// falling back to plain SPDY when the server (or a proxy) refuses the
// upgrade.
func DefaultPortForwardDialer(u *url.URL, cfg *rest.Config) (httpstream.Dialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialer(ws, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// dropLines leaves out the lines that start with prefix.
type dropLines struct {
	w      io.WriteCloser
	prefix []byte
	buf    []byte
}

func (d *dropLines) Write(p []byte) (int, error) {
	d.buf = append(d.buf, p...)
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := d.buf[:i+1]
		d.buf = d.buf[i+1:]
		if !bytes.HasPrefix(line, d.prefix) {
			if _, err := d.w.Write(line); err != nil {
				return len(p), err
			}
		}
	}
}

func (d *dropLines) Close() error {
	if len(d.buf) > 0 && !bytes.HasPrefix(d.buf, d.prefix) {
		_, _ = d.w.Write(d.buf)
	}
	return d.w.Close()
}
