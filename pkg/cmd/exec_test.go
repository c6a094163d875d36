package cmd_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// fakeExecutor plays the remote command: it records the URL and streams it
// was given, reads stdin, writes stdout and stderr and returns err.
type fakeExecutor struct {
	// what the remote command does
	stdout, stderr string
	err            error

	// what exec asked for
	calls int
	url   *url.URL
	host  string
	tty   bool
	stdin string
	// nil streams: the executor was not given them
	gotStdin, gotStderr bool
}

func (e *fakeExecutor) Stream(o remotecommand.StreamOptions) error {
	return e.StreamWithContext(context.Background(), o)
}

func (e *fakeExecutor) StreamWithContext(_ context.Context, o remotecommand.StreamOptions) error {
	e.tty = o.Tty
	if o.Stdin != nil {
		e.gotStdin = true
		b, err := io.ReadAll(o.Stdin)
		if err != nil {
			return err
		}
		e.stdin = string(b)
	}
	if _, err := io.WriteString(o.Stdout, e.stdout); err != nil {
		return err
	}
	if o.Stderr != nil {
		e.gotStderr = true
		if _, err := io.WriteString(o.Stderr, e.stderr); err != nil {
			return err
		}
	}
	return e.err
}

// kubeconfig writes a kubeconfig whose current context is the harness's ""
// cluster and whose k3s-ctx is the other one; nothing listens at either.
func (h *harness) kubeconfig() string {
	h.t.Helper()
	return h.writeFile("kubeconfig.yaml", `apiVersion: v1
kind: Config
current-context: main
clusters:
- name: main
  cluster: {server: "https://main.invalid:6443"}
- name: k3s
  cluster: {server: "https://k3s.invalid:6443"}
users:
- name: dev
  user: {token: secret}
contexts:
- name: main
  context: {cluster: main, user: dev}
- name: `+k3sContext+`
  context: {cluster: k3s, user: dev}
`)
}

// runExec runs `kubectl gobrave --kubeconfig … args…` like main does, with
// exec's executor replaced by ex and stdin as the input.
func (h *harness) runExec(ex *fakeExecutor, stdin string, args ...string) result {
	h.t.Helper()
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	f := h.factory()
	root := cmd.NewCmdRoot(f, streams)
	o := cmd.NewExecOptions(f, streams)
	o.Executor = func(u *url.URL, cfg *rest.Config) (remotecommand.Executor, error) {
		ex.calls++
		ex.url, ex.host = u, cfg.Host
		return ex, nil
	}
	old, _, err := root.Find([]string{"exec"})
	if err != nil || old.Name() != "exec" {
		h.t.Fatalf("no exec command in the tree: %v", err)
	}
	root.RemoveCommand(old)
	root.AddCommand(cmd.NewCmdExecWithOptions(o))
	root.SetArgs(append([]string{"--kubeconfig", h.kubeconfig()}, args...))
	err = root.ExecuteContext(h.t.Context())
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	r := result{stdout: out.String(), code: cmd.ExitCode(err), err: err}
	if err != nil {
		r.msg = cmd.FormatError(err)
		fmt.Fprintf(errOut, "error: %s\n", r.msg)
	}
	r.stderr = errOut.String()
	return r
}

func TestExecValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no --", []string{"exec", "web", "ls"}, "exec needs the command after --"},
		{"nothing after --", []string{"exec", "web", "--"}, "exec needs a command after --"},
		{"no ID", []string{"exec", "--", "ls"}, "one ID before --, got 0"},
		{"two IDs", []string{"exec", "web", "api", "--", "ls"}, "one ID before --, got 2"},
		{"bad runtime ID", []string{"exec", "k8s-default|pod|web", "--", "ls"}, "invalid runtime ID"},
		{"bad name", []string{"exec", "Web_1", "--", "ls"}, "neither a runtime ID"},
		{"bad container", []string{"exec", "web", "-c", "Side_Car", "--", "ls"}, `-c "Side_Car" is not a container name`},
		{"unknown flag", []string{"exec", "web", "--nope", "--", "ls"}, "unknown flag: --nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ex := &fakeExecutor{}
			r := h.runExec(ex, "", tt.args...)
			checkExit(t, r, cmd.ExitInvalid, tt.wantErr)
			if n := h.actions(); n != 0 {
				t.Errorf("invalid input made %d API requests: %s", n, h.describeActions())
			}
			if ex.calls != 0 {
				t.Error("invalid input reached the executor")
			}
			if _, exists := h.snapshot(); exists {
				t.Error("invalid input created the state database")
			}
		})
	}
}

func TestExec(t *testing.T) {
	h := newHarness(t)
	seedWebTask(t, h)
	old := podOf("default", "web", "web-old")
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	h.addOwnedPod("", "deployment", old)
	newest := podOf("default", "web", "web-new")
	newest.Spec.Containers = append(newest.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	h.addOwnedPod("", "deployment", newest)
	// Newer still, but not running: exec needs a running pod.
	pending := podOf("default", "web", "web-pending")
	pending.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
	pending.Status.Phase = corev1.PodPending
	h.addOwnedPod("", "deployment", pending)
	// Newer and running, labelled gobrave-workload=web, owned by nothing:
	// anyone's look-alike must not get the user's command.
	lookalike := podOf("default", "web", "web-lookalike")
	lookalike.CreationTimestamp = metav1.NewTime(time.Now().Add(2 * time.Hour))
	h.addPod("", lookalike)
	const path = "/api/v1/namespaces/default/pods/web-new/exec"

	tests := []struct {
		name      string
		args      []string
		stdin     string
		wantQuery url.Values
		wantIn    string // what the remote command read; "" with gotStdin false: no stream
		wantErr   string // on stderr, before "error: …"
	}{
		{
			name:      "command and output",
			args:      []string{"exec", "web", "--", "ls", "-l", "/data dir"},
			wantQuery: url.Values{"command": {"ls", "-l", "/data dir"}, "container": {"web"}, "stdout": {"true"}, "stderr": {"true"}},
		},
		{
			name:      "full ID, container, stdin",
			args:      []string{"exec", "-i", "-c", "sidecar", webID, "--", "cat"},
			stdin:     "piped\n",
			wantQuery: url.Values{"command": {"cat"}, "container": {"sidecar"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}},
			wantIn:    "piped\n",
		},
		{
			name:      "-it without a terminal: a warning, no TTY",
			args:      []string{"exec", "-it", "deployment/web", "--", "sh"},
			stdin:     "echo hi\n",
			wantQuery: url.Values{"command": {"sh"}, "container": {"web"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}},
			wantIn:    "echo hi\n",
			wantErr:   "Unable to use a TTY - input is not a terminal or the right kind of file\n",
		},
		{
			name:      "-t without -i: a warning, no TTY, no stdin",
			args:      []string{"exec", "-t", "web", "--", "top"},
			stdin:     "ignored",
			wantQuery: url.Values{"command": {"top"}, "container": {"web"}, "stdout": {"true"}, "stderr": {"true"}},
			wantErr:   "Unable to use a TTY - pass -i with -t to attach stdin\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := &fakeExecutor{stdout: "remote out\n", stderr: "remote err\n"}
			r := h.runExec(ex, tt.stdin, tt.args...)
			checkExit(t, r, 0, "")
			if ex.calls != 1 {
				t.Fatalf("executor built %d times, want 1", ex.calls)
			}
			if ex.host != "https://main.invalid:6443" {
				t.Errorf("REST config host %q, want the current context's", ex.host)
			}
			if ex.url.Path != path {
				t.Errorf("URL path %q, want %q (the newest running pod)", ex.url.Path, path)
			}
			if diff := cmp.Diff(tt.wantQuery, ex.url.Query()); diff != "" {
				t.Errorf("URL query (-want +got):\n%s", diff)
			}
			if ex.tty {
				t.Error("the stream has a TTY; stdin is not a terminal")
			}
			if ex.gotStdin != (tt.wantIn != "") || ex.stdin != tt.wantIn {
				t.Errorf("remote stdin %q (stream given: %v), want %q", ex.stdin, ex.gotStdin, tt.wantIn)
			}
			if r.stdout != "remote out\n" {
				t.Errorf("stdout %q, want the remote command's", r.stdout)
			}
			if want := tt.wantErr + "remote err\n"; r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
		})
	}

	t.Run("the remote exit code is the exit code", func(t *testing.T) {
		ex := &fakeExecutor{stdout: "partial\n", err: utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}}
		r := h.runExec(ex, "", "exec", "web", "--", "false")
		checkExit(t, r, 3, "exec "+webID+" (pod web-new): command terminated with exit code 3")
		if r.stdout != "partial\n" {
			t.Errorf("stdout %q, want what the command printed before it failed", r.stdout)
		}
	})

	t.Run("a stream error is exit 1 with a hint", func(t *testing.T) {
		ex := &fakeExecutor{err: errors.New("upgrade request required")}
		r := h.runExec(ex, "", "exec", "web", "--", "ls")
		checkExit(t, r, 1, "upgrade request required (check 'kubectl gobrave inspect "+webID+"')")
	})

	t.Run("unknown container", func(t *testing.T) {
		ex := &fakeExecutor{}
		r := h.runExec(ex, "", "exec", "web", "-c", "nosuch", "--", "ls")
		checkExit(t, r, 1, `pod web-new has no container "nosuch" (its containers: web, sidecar)`)
		if ex.calls != 0 {
			t.Error("the executor was built for a container that does not exist")
		}
	})

	t.Run("no running pod", func(t *testing.T) {
		ex := &fakeExecutor{}
		r := h.runExec(ex, "", "exec", "task", "--", "ls")
		checkExit(t, r, 1, "has no running pod")
		if !strings.Contains(r.msg, "kubectl gobrave inspect") || ex.calls != 0 {
			t.Errorf("%q: want a hint and no executor (calls %d)", r.msg, ex.calls)
		}
	})

	t.Run("not recorded", func(t *testing.T) {
		r := h.runExec(&fakeExecutor{}, "", "exec", "nosuch", "--", "ls")
		checkExit(t, r, 1, `no workload named "nosuch"`)
	})
}

// TestExecK3sContext: a workload of the k3s runtime is exec'd through the
// profile's kubeconfig context.
func TestExecK3sContext(t *testing.T) {
	h := newHarness(t)
	h.configPath = "testdata/config-k3s.yaml"
	h.ok("create", "gpu", "--runtime", "k3s", "--image", "nginx:1.27")
	h.addOwnedPod(k3sContext, "deployment", podOf("ai", "gpu", "gpu-1"))
	ex := &fakeExecutor{stdout: "hi\n"}
	r := h.runExec(ex, "", "exec", "k3s-ai|deployment|gpu", "--", "echo", "hi")
	checkExit(t, r, 0, "")
	if ex.host != "https://k3s.invalid:6443" || ex.url.Path != "/api/v1/namespaces/ai/pods/gpu-1/exec" {
		t.Errorf("exec went to %s%s, want the k3s-ctx cluster and pod ai/gpu-1", ex.host, ex.url.Path)
	}
}

// TestExecOneNameTwoKinds: a Job named like the recorded deployment (made
// with kubectl, its pods labelled gobrave-workload=web too) never gets the
// deployment's commands, logs or inspect, however new its pod.
func TestExecOneNameTwoKinds(t *testing.T) {
	h := newHarness(t)
	h.ok("create", "web", "--image", "nginx:1.27")
	h.addOwnedPod("", "deployment", podOf("default", "web", "web-dep"))
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "job-web",
		Labels: map[string]string{"gobrave-workload": "web"}}}
	if _, err := h.clusters[""].BatchV1().Jobs("default").Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobPod := podOf("default", "web", "web-job")
	jobPod.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
	jobPod.Spec.NodeName = "node-job"
	h.addOwnedPod("", "job", jobPod)

	ex := &fakeExecutor{}
	checkExit(t, h.runExec(ex, "", "exec", "web", "--", "hostname"), 0, "")
	if ex.url.Path != "/api/v1/namespaces/default/pods/web-dep/exec" {
		t.Errorf("exec went to %s, want the deployment's pod web-dep", ex.url.Path)
	}
	r := h.run("inspect", "web", "-o", "json")
	checkExit(t, r, 0, "")
	if !strings.Contains(r.stdout, `"podName": "web-dep"`) {
		t.Errorf("inspect: want podName web-dep\n%s", r.stdout)
	}
	// logs reads the deployment's pod too (the fake names it in its error).
	h.clusters[""].PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		return a.GetSubresource() == "log", nil, errors.New("no log stream in the fake")
	})
	checkExit(t, h.run("logs", "web"), 1, "(pod web-dep)")
}
