// dra-allocator: kube-scheduler's own DRA allocation, as a test oracle for topocni's
// ResourceSlices, DeviceClasses and claim templates.
//
// It reads JSON requests, one per line, on stdin and answers each with one JSON line on
// stdout. Two kinds:
//
//	{"op": "allocate", "node": Node, "slices": [ResourceSlice], "classes": [DeviceClass],
//	 "allocated": [ResourceClaim], "claims": [ResourceClaim]}
//	  -> {"results": [{"claim": name, "outcome": "allocated"|"unfit"|"error",
//	                   "allocation": AllocationResult, "error": text}]}
//	  ("unfit" with an error: one wrapping structured.ErrFailedAllocationOnNode, which
//	  kube-scheduler reports as the node's unschedulable reason)
//	  The claims are allocated one after another on the node, each on top of the
//	  allocated claims and the claims allocated before it in this request, as
//	  kube-scheduler assumes a claim it allocated before it looks at the next pod.
//
//	{"op": "cel", "expressions": [string], "devices": [{"driver": d, "device": Device}]}
//	  -> {"results": [{"expression": e, "compileError": text, "matches": [true|false|null],
//	                   "errors": [text]}]}
//	  Each expression compiled in the CEL environment of the scheduler's cache and
//	  evaluated on each device, as a selector is.
//
//	{"op": "about"}
//	  -> {"implementation": Go package of the allocator NewAllocator returned,
//	      "zeroFeaturesImplementation": the one structured.Features{} would get,
//	      "features": structured.Features, "celFeatures": cel.Features}
//
// The features are kube-scheduler's at its v1.37.2 defaults, through its own code: the
// gates' defaults registered by k8s.io/kubernetes/pkg/features, read by the scheduler's
// feature.NewSchedulerFeaturesFromGates and mapped by dynamicresources.AllocatorFeatures.
// The zero structured.Features would silently pick another implementation.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	_ "k8s.io/kubernetes/pkg/features" // registers every gate with its default
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// schedulerFeatures is what kube-scheduler computes at start from its feature gates.
func schedulerFeatures() feature.Features {
	return feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

type oracle struct {
	features structured.Features
	celCache *cel.Cache
}

func newOracle() *oracle {
	fts := schedulerFeatures()
	// As the plugin's New() makes its cache (dynamicresources.go).
	return &oracle{
		features: dynamicresources.AllocatorFeatures(fts),
		celCache: cel.NewCache(10, cel.Features{
			EnableConsumableCapacity: fts.EnableDRAConsumableCapacity,
			EnableListTypeAttributes: fts.EnableDRAListTypeAttributes,
		}),
	}
}

func (o *oracle) celFeatures() cel.Features {
	fts := schedulerFeatures()
	return cel.Features{EnableConsumableCapacity: fts.EnableDRAConsumableCapacity,
		EnableListTypeAttributes: fts.EnableDRAListTypeAttributes}
}

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, x := range c {
		out = append(out, x)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if x, ok := c[name]; ok {
		return x, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

// allocatedState gathers what the claims hold, as the scheduler's claim tracker does
// (dynamicresources/allocateddevices.go, foreachAllocatedDevice): an admin-access result
// holds nothing; with consumable capacity, a result with a share ID holds that share and
// its consumed capacity; every other result holds its device.
func (o *oracle) allocatedState(claims []*resourceapi.ResourceClaim) structured.AllocatedState {
	s := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		o.hold(&s, c)
	}
	return s
}

func (o *oracle) hold(s *structured.AllocatedState, c *resourceapi.ResourceClaim) {
	if c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if o.features.ConsumableCapacity && r.ShareID != nil {
			s.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		s.AllocatedDevices.Insert(id)
	}
}

type allocateRequest struct {
	Node      *v1.Node                     `json:"node"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
}

type allocateResult struct {
	Claim      string                        `json:"claim"`
	Outcome    string                        `json:"outcome"`
	Allocation *resourceapi.AllocationResult `json:"allocation,omitempty"`
	Error      string                        `json:"error,omitempty"`
}

func (o *oracle) allocate(ctx context.Context, req allocateRequest) ([]allocateResult, error) {
	if req.Node == nil {
		return nil, errors.New("allocate: no node")
	}
	cls := classes{}
	for _, c := range req.Classes {
		cls[c.Name] = c
	}
	held := append([]*resourceapi.ResourceClaim(nil), req.Allocated...)
	out := []allocateResult{}
	for _, claim := range req.Claims {
		res := allocateResult{Claim: claim.Name}
		// A new allocator per claim, over the state with the claims before it: as the
		// scheduler builds one in PreFilter for each pod.
		a, err := structured.NewAllocator(ctx, o.features, o.allocatedState(held), cls, req.Slices, o.celCache)
		if err != nil {
			return nil, fmt.Errorf("NewAllocator: %w", err)
		}
		results, err := a.Allocate(ctx, req.Node, []*resourceapi.ResourceClaim{claim})
		switch {
		case err != nil && errors.Is(err, structured.ErrFailedAllocationOnNode):
			// kube-scheduler: unschedulable on this node, not a failure of the attempt.
			res.Outcome, res.Error = "unfit", err.Error()
		case err != nil:
			res.Outcome, res.Error = "error", err.Error()
		case results == nil:
			res.Outcome = "unfit"
		default:
			res.Outcome, res.Allocation = "allocated", &results[0]
			done := claim.DeepCopy()
			done.Status.Allocation = &results[0]
			held = append(held, done)
		}
		out = append(out, res)
	}
	return out, nil
}

type celDevice struct {
	Driver string             `json:"driver"`
	Device resourceapi.Device `json:"device"`
}

type celRequest struct {
	Expressions []string    `json:"expressions"`
	Devices     []celDevice `json:"devices"`
}

type celResult struct {
	Expression   string   `json:"expression"`
	CompileError string   `json:"compileError,omitempty"`
	Matches      []*bool  `json:"matches"`
	Errors       []string `json:"errors"`
}

func (o *oracle) evaluate(ctx context.Context, req celRequest) []celResult {
	out := []celResult{}
	for _, e := range req.Expressions {
		r := celResult{Expression: e, Matches: []*bool{}, Errors: []string{}}
		compiled := o.celCache.GetOrCompile(e)
		if compiled.Error != nil {
			r.CompileError = compiled.Error.Error()
			out = append(out, r)
			continue
		}
		for _, d := range req.Devices {
			ok, _, err := compiled.DeviceMatches(ctx, cel.Device{
				Driver: d.Driver, AllowMultipleAllocations: d.Device.AllowMultipleAllocations,
				Attributes: d.Device.Attributes, Capacity: d.Device.Capacity})
			if err != nil {
				r.Matches = append(r.Matches, nil)
				r.Errors = append(r.Errors, err.Error())
				continue
			}
			v := ok
			r.Matches = append(r.Matches, &v)
			r.Errors = append(r.Errors, "")
		}
		out = append(out, r)
	}
	return out
}

// implementation names the Go package of the allocator NewAllocator picks for these
// features ("k8s.io/dynamic-resource-allocation/structured/internal/incubating").
func (o *oracle) implementation(ctx context.Context, features structured.Features) (string, error) {
	a, err := structured.NewAllocator(ctx, features, o.allocatedState(nil), classes{}, nil, o.celCache)
	if err != nil {
		return "", err
	}
	t := reflect.TypeOf(a)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath(), nil
}

func (o *oracle) answer(ctx context.Context, line []byte) any {
	var head struct {
		Op string `json:"op"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return map[string]string{"error": "not a JSON request: " + err.Error()}
	}
	switch head.Op {
	case "allocate":
		var req allocateRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return map[string]string{"error": "allocate: " + err.Error()}
		}
		results, err := o.allocate(ctx, req)
		if err != nil {
			return map[string]string{"error": err.Error()}
		}
		return map[string]any{"results": results}
	case "cel":
		var req celRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return map[string]string{"error": "cel: " + err.Error()}
		}
		return map[string]any{"results": o.evaluate(ctx, req)}
	case "about":
		impl, err := o.implementation(ctx, o.features)
		if err != nil {
			return map[string]string{"error": err.Error()}
		}
		// What a caller passing structured.Features{} would get instead: the trap.
		zero, err := o.implementation(ctx, structured.Features{})
		if err != nil {
			return map[string]string{"error": err.Error()}
		}
		return map[string]any{"implementation": impl, "zeroFeaturesImplementation": zero,
			"features": o.features, "celFeatures": o.celFeatures()}
	}
	return map[string]string{"error": fmt.Sprintf("unknown op %q", head.Op)}
}

func serve(ctx context.Context, in io.Reader, out io.Writer) error {
	o := newOracle()
	r := bufio.NewReader(in)
	w := json.NewEncoder(out)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if err := w.Encode(o.answer(ctx, line)); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func main() {
	if err := serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dra-allocator:", err)
		os.Exit(1)
	}
}
