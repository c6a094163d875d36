package main

import (
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/cobra/doc"
	_ "go.yaml.in/yaml/v3"
	_ "k8s.io/apimachinery/pkg/util/wait"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "k8s.io/cli-runtime/pkg/genericiooptions"
	_ "k8s.io/cli-runtime/pkg/printers"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/client-go/tools/remotecommand"
	_ "k8s.io/client-go/util/retry"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/client-go/util/flowcontrol"
	_ "k8s.io/klog/v2"
	_ "modernc.org/sqlite"
	_ "sigs.k8s.io/yaml"
	_ "github.com/google/go-cmp/cmp"
	_ "golang.org/x/term"
	_ "k8s.io/apimachinery/pkg/util/validation"
)

func main() {}
