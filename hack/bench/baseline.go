package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// baselineUA is the User-Agent of the per-ID baseline.
const baselineUA = "gobrave-bench-baseline/"

// baselineResult is what `bench baseline` prints as JSON.
type baselineResult struct {
	IDs      int     `json:"ids"`      // non-terminal records
	GETs     int     `json:"gets"`     // GETs made (IDs, or the cap)
	SyncMs   float64 `json:"syncMs"`   // process start to both informers synced
	GETsMs   float64 `json:"getsMs"`   // the GETs and their recording
	TotalMs  float64 `json:"totalMs"`  // process start to the last state recorded
	Recorded int     `json:"recorded"` // transitions applied
	Cached   int     `json:"cached"`   // objects in the informer caches
}

// baselineMain is the original design's reconcile pass, kept here only as the benchmark's
// baseline: cluster-wide informers with no label selector and no transform (every deployment and
// job of the cluster cached whole), then for each non-terminal ID a direct GET of its object (the
// spec's snapshot check) through client-go's default rate limiter (5 QPS, burst 10), each result
// mapped with pkg/monitor's pure functions and recorded with store.ApplyBatch in batches of 256.
// -limit stops after that many GETs, so the caller can extrapolate a long run.
func baselineMain(args []string) int {
	start := time.Now()
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	db := fs.String("state-db", "", "state database")
	limit := fs.Int("limit", 0, "stop after this many GETs (0: every ID)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	res, err := baseline(context.Background(), start, *kubeconfig, *db, *limit)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baseline: %v\n", err)
		return 1
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return 0
}

func baseline(ctx context.Context, start time.Time, kubeconfig, db string, limit int) (baselineResult, error) {
	var res baselineResult
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return res, err
	}
	rc.UserAgent = baselineUA + "1"
	rc.QPS, rc.Burst = 5, 10 // client-go's defaults, spelled out
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return res, err
	}
	st, err := store.Open(ctx, db)
	if err != nil {
		return res, err
	}
	defer st.Close()
	ws, err := st.List(ctx, store.Filter{NoSpec: true})
	if err != nil {
		return res, err
	}
	res.IDs = len(ws)

	f := informers.NewSharedInformerFactory(c, 0)
	di := f.Apps().V1().Deployments().Informer()
	ji := f.Batch().V1().Jobs().Informer()
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, di.HasSynced, ji.HasSynced) {
		return res, fmt.Errorf("informers did not sync")
	}
	res.SyncMs = ms(time.Since(start))
	res.Cached = len(di.GetStore().List()) + len(ji.GetStore().List())

	getsStart := time.Now()
	var batch []store.Transition
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		as, err := st.ApplyBatch(ctx, batch)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.Applied {
				res.Recorded++
			}
		}
		batch = batch[:0]
		return nil
	}
	for _, w := range ws {
		if limit > 0 && res.GETs >= limit {
			break
		}
		var (
			obs monitor.Observation
			ok  bool
		)
		switch w.Kind {
		case runtimeid.KindDeployment:
			var d *appsv1.Deployment
			if d, err = c.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
				obs, ok = runtime.DeploymentEvent(d)
			}
		case runtimeid.KindJob:
			var j *batchv1.Job
			if j, err = c.BatchV1().Jobs(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
				obs, ok = runtime.JobEvent(j)
			}
		}
		res.GETs++
		if err != nil {
			return res, fmt.Errorf("get %s: %w", w.RuntimeID, err)
		}
		if ok {
			batch = append(batch, store.Transition{RuntimeID: w.RuntimeID, Type: obs.Type, Message: obs.Message, UID: obs.UID})
		}
		if len(batch) == 256 {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	res.GETsMs = ms(time.Since(getsStart))
	res.TotalMs = ms(time.Since(start))
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
