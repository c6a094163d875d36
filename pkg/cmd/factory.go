package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/pkg/config"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Factory hands out what the verbs need — the runtime profiles, clients per
// kubeconfig context and the state database — lazily, built once at the
// root from one set of kubeconfig flags. Tests replace NewClient.
type Factory struct {
	ConfigFlags *genericclioptions.ConfigFlags

	// Flags of the root command.
	RuntimeFlag string
	StateDBFlag string
	ConfigFlag  string

	// Getenv and Home make path resolution testable.
	Getenv func(string) string
	Home   string

	// NewClient builds a clientset for a kubeconfig context ("" = current).
	// Nil means build it from ConfigFlags.
	NewClient func(context string) (kubernetes.Interface, error)
	// NewClusterID tells the identity of a context's cluster in tests. Nil
	// means ClusterID reads it from the REST config, or, with NewClient
	// set, that it is unknown.
	NewClusterID func(context string) (string, error)
	// Warnings receives the warnings of helpers with no streams of their
	// own (the monitors' set); nil discards them.
	Warnings io.Writer

	mu      sync.Mutex
	cfg     *config.Config
	store   *store.Store
	clients map[string]kubernetes.Interface
	// watchClients are WatchClient's, by context.
	watchClients map[string]kubernetes.Interface
	cluster      map[string]string

	// warnMu keeps warn's lines whole.
	warnMu sync.Mutex

	// rcMu guards rcs, the REST configs by context, each loaded from the
	// kubeconfig once (RESTConfig runs under mu, from Client).
	rcMu sync.Mutex
	rcs  map[string]*rest.Config
}

// NewFactory returns a factory over the process environment.
func NewFactory() *Factory {
	home, _ := os.UserHomeDir()
	return &Factory{
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		Getenv:      os.Getenv,
		Home:        home,
	}
}

// Config loads the runtime profiles once.
func (f *Factory) Config() (config.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cfg != nil {
		return *f.cfg, nil
	}
	path, explicit := config.ConfigPath(f.ConfigFlag, f.Getenv, f.Home)
	c, err := config.LoadOrDefault(path, explicit)
	if err != nil {
		// A profiles file that is missing, unreadable or invalid is bad input.
		if !errors.Is(err, config.ErrInvalid) {
			err = fmt.Errorf("%w: %w", ErrUsage, err)
		}
		return config.Config{}, err
	}
	f.cfg = &c
	return c, nil
}

// Runtime is the runtime name new workloads get: --runtime, else the
// profile file's default, else k8s.
func (f *Factory) Runtime() (string, error) {
	c, err := f.Config()
	if err != nil {
		return "", err
	}
	return c.Runtime(f.RuntimeFlag)
}

// StatePath is the state database file in use.
func (f *Factory) StatePath() (string, error) {
	return config.StatePath(f.StateDBFlag, f.Getenv, f.Home)
}

// Store opens the state database once.
func (f *Factory) Store(ctx context.Context) (*store.Store, error) {
	return f.openStore(ctx)
}

// recoverCacheKiB is SQLite's page cache per connection of `recover
// --once`, instead of the default 2,000 KiB. Its writer's working set (the
// B-tree pages it updates a batch at a time) fits; what fills the rest of a
// default cache is what grows with the database: its LiveScopes scan reads
// every record's page once, and a second connection (opened to prepare a
// statement while the writer's transaction holds the first) fills its own.
// On a real cluster at 20,000 workloads the peak RSS fell 55.0 -> 52.9 MiB
// (medians of 9 interleaved runs, CPU 2.36 -> 2.32 s), on the generated
// server at 100,000 over TLS 60.6 -> 58.2 MiB (CPU 7.11 -> 6.93 s, medians
// of 3); 500 KiB saved no more. At 1,000 the database is smaller than either cache:
// nothing changes there, so the curve of RSS over N flattens.
const recoverCacheKiB = 1000

// RecoverStore is Store for `recover --once`: its connections get a page
// cache of recoverCacheKiB. When the store is already open it is returned
// as it is.
func (f *Factory) RecoverStore(ctx context.Context) (*store.Store, error) {
	return f.openStore(ctx, store.CacheKiB(recoverCacheKiB))
}

// followerCacheKiB is SQLite's page cache per connection of a process that
// follows the database (FollowingStore), instead of the default 2,000 KiB.
// A following monitor's writes are its observations, in batches of up to
// 256; the page cache of its connections was about 11 MiB of its peak RSS
// at 100,000 workloads (docs/performance.md, "The lead's measurements").
const followerCacheKiB = 512

// FollowingStore is Store for a process that runs until interrupted and
// keeps a small heap (monitor --all --follow, recover without --once): its
// connections get a smaller page cache (followerCacheKiB). When the store
// is already open it is returned as it is.
func (f *Factory) FollowingStore(ctx context.Context) (*store.Store, error) {
	return f.openStore(ctx, store.CacheKiB(followerCacheKiB))
}

func (f *Factory) openStore(ctx context.Context, opts ...store.Option) (*store.Store, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.store != nil {
		return f.store, nil
	}
	path, err := f.StatePath()
	if err != nil {
		return nil, err
	}
	s, err := store.Open(ctx, path, opts...)
	if err != nil {
		return nil, err
	}
	f.store = s
	return s, nil
}

// Close releases the state database.
func (f *Factory) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.store == nil {
		return nil
	}
	err := f.store.Close()
	f.store = nil
	return err
}

// ContextFor returns the kubeconfig context used for runtime: --context when
// given, else the runtime profile's context ("" = the current context).
func (f *Factory) ContextFor(runtime string) (string, error) {
	if f.ConfigFlags.Context != nil && *f.ConfigFlags.Context != "" {
		return *f.ConfigFlags.Context, nil
	}
	c, err := f.Config()
	if err != nil {
		return "", err
	}
	return c.Profile(runtime).Context, nil
}

// Client returns the clientset for runtime's context, built once per context.
func (f *Factory) Client(runtime string) (kubernetes.Interface, error) {
	return f.cachedClient(&f.clients, runtime, func(ctxName string) (kubernetes.Interface, error) {
		if f.NewClient != nil {
			return f.NewClient(ctxName)
		}
		return f.buildClient(ctxName)
	})
}

// WatchClient returns the clientset the monitors that follow use for
// runtime's context, built once per context: Client's, but speaking
// HTTP/1.1 only, so that each of a monitor's watches (pods, Deployments,
// ReplicaSets, Jobs) has a connection of its own. On Client's one HTTP/2
// connection, the watches share one TCP stream and one reading goroutine,
// and a burst of one kind's events (the pods of 1,000 jobs ending) delays
// another's: the bench's event-to-row latency of the jobs, with a monitor
// of each side by side on the same events (hack/bench -latency-baseline),
// was p99 34–43 ms on HTTP/2 and 21–26 ms on HTTP/1.1 at N = 1,000, 105
// against 16 ms at 100,000 (docs/performance.md). recover --once stays on
// Client's HTTP/2: its two or four streams gained nothing on HTTP/1.1.
// With NewClient (tests), it is Client.
func (f *Factory) WatchClient(runtime string) (kubernetes.Interface, error) {
	if f.NewClient != nil {
		return f.Client(runtime)
	}
	return f.cachedClient(&f.watchClients, runtime, func(ctxName string) (kubernetes.Interface, error) {
		rc, err := f.RESTConfig(ctxName)
		if err != nil {
			return nil, err
		}
		// client-go configures HTTP/2 only on a transport whose TLS
		// NextProtos allow it (utilnet.SetTransportDefaults), and caches
		// transports by these settings: this one is not Client's.
		rc.TLSClientConfig.NextProtos = []string{"http/1.1"}
		c, err := newClientset(rc)
		if err != nil {
			return nil, fmt.Errorf("build watch client for context %q: %w", ctxName, err)
		}
		return c, nil
	})
}

// cachedClient returns the clientset of runtime's context in *cache, built
// by build (under f.mu) the first time.
func (f *Factory) cachedClient(cache *map[string]kubernetes.Interface, runtime string, build func(ctxName string) (kubernetes.Interface, error)) (kubernetes.Interface, error) {
	ctxName, err := f.ContextFor(runtime)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := (*cache)[ctxName]; ok {
		return c, nil
	}
	c, err := build(ctxName)
	if err != nil {
		return nil, err
	}
	if *cache == nil {
		*cache = map[string]kubernetes.Interface{}
	}
	(*cache)[ctxName] = c
	return c, nil
}

// ClusterID returns the identity of the cluster runtime's context points at:
// its API server's URL and the SHA-256 of the CA it trusts, e.g.
// "https://127.0.0.1:6443 (ca sha256:3f2a…)". Records keep it, so that a
// verb run after the context changed refuses to act on another cluster.
func (f *Factory) ClusterID(runtime string) (string, error) {
	ctxName, err := f.ContextFor(runtime)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	id, ok := f.cluster[ctxName]
	f.mu.Unlock()
	if ok {
		return id, nil
	}
	switch {
	case f.NewClusterID != nil:
		id, err = f.NewClusterID(ctxName)
	case f.NewClient != nil:
		id = ""
	default:
		var rc *rest.Config
		if rc, err = f.RESTConfig(ctxName); err == nil {
			id, err = clusterIdentity(rc)
		}
	}
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cluster == nil {
		f.cluster = map[string]string{}
	}
	f.cluster[ctxName] = id
	return id, nil
}

// clusterIdentity is the API server's URL (scheme, host, path) and the
// fingerprint of the CA bundle the config trusts, when it has one.
func clusterIdentity(rc *rest.Config) (string, error) {
	u, err := url.Parse(rc.Host)
	if err != nil || u.Host == "" {
		return rc.Host, nil
	}
	id := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, "/")}).String()
	ca := rc.CAData
	if len(ca) == 0 && rc.CAFile != "" {
		if ca, err = os.ReadFile(rc.CAFile); err != nil {
			return "", fmt.Errorf("kubeconfig: read the CA file %s: %w", rc.CAFile, err)
		}
	}
	if len(ca) > 0 {
		sum := sha256.Sum256(ca)
		id += " (ca sha256:" + hex.EncodeToString(sum[:])[:16] + ")"
	}
	return id, nil
}

// warn writes msg to Warnings as one "warning:" line, escaped for the
// terminal (it may quote the server). Safe for concurrent use: the
// monitors' informers warn from their own goroutines.
func (f *Factory) warn(msg string) {
	f.warnMu.Lock()
	defer f.warnMu.Unlock()
	fmt.Fprintf(f.warnings(), "warning: %s\n", escapeTerminal(msg))
}

func (f *Factory) warnings() io.Writer {
	if f.Warnings == nil {
		return io.Discard
	}
	return f.Warnings
}

// flagsFor copies the kubeconfig flags with the context replaced. Every
// exported field of ConfigFlags is copied (--proxy-url, --as-user-extra and
// whatever cli-runtime adds next), so cli-runtime's own ToRawKubeConfigLoader
// turns them into clientcmd overrides exactly as for kubectl. The value is
// not copied whole: it holds mutexes and a cached client config of the
// other context. TestFlagsForHonoursEveryConfigFlag fails when a field is
// added without a check that it reaches the REST config.
func (f *Factory) flagsFor(ctxName string) *genericclioptions.ConfigFlags {
	dst := genericclioptions.NewConfigFlags(true)
	src, out := reflect.ValueOf(f.ConfigFlags).Elem(), reflect.ValueOf(dst).Elem()
	for i := range src.NumField() {
		if src.Type().Field(i).IsExported() {
			out.Field(i).Set(src.Field(i))
		}
	}
	dst.Context = &ctxName
	return dst
}

// RESTConfig returns the REST config of a kubeconfig context with the
// plugin's User-Agent: a copy of its own for each call (callers may change
// it), of a config loaded once per context. recover --once needed one for
// its clientset, one for the cluster's identity and one for the metadata
// client: three loads (files read, YAML decoded and merged) of the same
// kubeconfig before the first request.
func (f *Factory) RESTConfig(ctxName string) (*rest.Config, error) {
	f.rcMu.Lock()
	defer f.rcMu.Unlock()
	if rc, ok := f.rcs[ctxName]; ok {
		return rest.CopyConfig(rc), nil
	}
	rc, err := f.loadRESTConfig(ctxName)
	if err != nil {
		return nil, err
	}
	if f.rcs == nil {
		f.rcs = map[string]*rest.Config{}
	}
	f.rcs[ctxName] = rc
	return rest.CopyConfig(rc), nil
}

func (f *Factory) loadRESTConfig(ctxName string) (*rest.Config, error) {
	rc, err := f.flagsFor(ctxName).ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w (check --kubeconfig, $KUBECONFIG and --context)", err)
	}
	rc.UserAgent = UserAgent()
	// Protobuf for the built-in kinds we read and write (as the controllers
	// do): an informer's initial list of thousands of Deployments and Jobs
	// decodes in a fraction of the CPU and garbage of JSON. JSON stays
	// accepted for anything served only as JSON.
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	// Lists and watches are few; a burst of lifecycle calls over many IDs
	// should not queue behind client-go's default 5 QPS.
	rc.QPS, rc.Burst = 50, 100
	boundStreamBuffers(rc)
	return rc, nil
}

func (f *Factory) buildClient(ctxName string) (kubernetes.Interface, error) {
	rc, err := f.RESTConfig(ctxName)
	if err != nil {
		return nil, err
	}
	c, err := newClientset(rc)
	if err != nil {
		return nil, fmt.Errorf("build client for context %q: %w", ctxName, err)
	}
	return c, nil
}

// Namespace resolves the namespace for new workloads of runtime, by the
// specification's priority with -n first (flags override files): -n, the
// spec's runtimeNamespace, the runtime profile, the kubeconfig context, default.
func (f *Factory) Namespace(runtime, specNS string) (string, error) {
	if f.ConfigFlags.Namespace != nil && *f.ConfigFlags.Namespace != "" {
		return *f.ConfigFlags.Namespace, nil
	}
	if specNS != "" {
		return specNS, nil
	}
	c, err := f.Config()
	if err != nil {
		return "", err
	}
	if ns := c.Profile(runtime).Namespace; ns != "" {
		return ns, nil
	}
	ctxName, err := f.ContextFor(runtime)
	if err != nil {
		return "", err
	}
	if f.NewClient != nil {
		// Tests run without a kubeconfig.
		return "default", nil
	}
	ns, _, err := f.flagsFor(ctxName).ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		return "default", nil
	}
	return ns, nil
}

// requestTimeout is --request-timeout as a duration, 0 when it is unset, zero
// or invalid (building the REST config reports an invalid one). A bare number
// is seconds, as for kubectl.
func (f *Factory) requestTimeout() time.Duration {
	if f.ConfigFlags == nil || f.ConfigFlags.Timeout == nil {
		return 0
	}
	v := strings.TrimSpace(*f.ConfigFlags.Timeout)
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
