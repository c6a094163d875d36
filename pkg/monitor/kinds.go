package monitor

import "github.com/gobrave/kubectl-gobrave/pkg/runtime"

// WorkloadLabel selects the objects gobrave manages; the informers list and
// watch only those.
const WorkloadLabel = runtime.LabelWorkload

// Observation is what the monitor saw of one object (runtime.Observation):
// each kind maps its status in pkg/runtime.
type Observation = runtime.Observation

// Deleted is the observation of an object that is gone.
var Deleted = runtime.Deleted

// observe maps an object through its kind.
var observe = runtime.Observe

// slim is the informers' transform (runtime.Slim).
var slim = runtime.Slim
