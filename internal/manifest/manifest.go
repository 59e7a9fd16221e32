package manifest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/admission"
)

// Set is everything read from a list of manifests.
type Set struct {
	NodePools       []*karpv1.NodePool
	NodeClaims      []*karpv1.NodeClaim
	EC2NodeClasses  []*awsv1.EC2NodeClass
	KWOKNodeClasses []*kwokv1alpha1.KWOKNodeClass
	Nodes           []*corev1.Node
	// Pods holds standalone pods and the pods workloads expand to.
	Pods         []*corev1.Pod
	Deployments  []*appsv1.Deployment
	ReplicaSets  []*appsv1.ReplicaSet
	StatefulSets []*appsv1.StatefulSet
	Jobs         []*batchv1.Job
	DaemonSets   []*appsv1.DaemonSet
	// Namespaces (for namespaceSelectors) and storage (for volume topology).
	Namespaces             []*corev1.Namespace
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// PodDisruptionBudgets shape no purchase; the simulator's evictions
	// honour them.
	PodDisruptionBudgets []*policyv1.PodDisruptionBudget
	// Ignored counts documents of kinds that do not affect node decisions
	// (Namespaces, Services, ConfigMaps, ...), by kind.
	Ignored map[string]int
}

// ignoredKinds are accepted and skipped: they shape no node decision.
var ignoredKinds = map[string]bool{
	"Service": true, "ConfigMap": true, "Secret": true, "ServiceAccount": true,
	"PriorityClass": true, "HorizontalPodAutoscaler": true,
	"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"Ingress": true, "NetworkPolicy": true, "LimitRange": true, "ResourceQuota": true,
}

// Load reads files and directories (the *.yaml, *.yml and *.json files
// directly in a directory, as `kubectl apply -f DIR` does).
func Load(paths ...string) (*Set, error) {
	s := &Set{}
	for _, p := range paths {
		files, err := Files(OS, p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := fs.ReadFile(OS, f)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			if err := s.Add(f, data); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// OS reads the operating system's files by their own paths, relative or
// absolute (which fs.FS paths may not be).
var OS fs.FS = osFS{}

type osFS struct{}

func (osFS) Open(name string) (fs.File, error) { return os.Open(filepath.FromSlash(name)) }

// Files lists p when it is a file, or the *.yaml, *.yml and *.json files
// directly in it (sorted, not its subdirectories) when it is a directory.
func Files(fsys fs.FS, p string) ([]string, error) {
	info, err := fs.Stat(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	entries, err := fs.ReadDir(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", p, err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(path.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, path.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s has no .yaml, .yml or .json files", p)
	}
	slices.Sort(files)
	return files, nil
}

// Add decodes every document of one file (or stream) named source.
func (s *Set) Add(source string, data []byte) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return fmt.Errorf("%s: document %d: not valid YAML: %w", source, doc, err)
		}
		if err := s.addJSON(js); err != nil {
			return fmt.Errorf("%s: document %d%s: %w", source, doc, describe(js), err)
		}
	}
}

func isOnlyComments(raw []byte) bool {
	for _, line := range strings.Split(string(raw), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

// describe renders " (Kind namespace/name)" for messages.
func describe(js []byte) string {
	var head struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if json.Unmarshal(js, &head) != nil || head.Kind == "" {
		return ""
	}
	name := head.Metadata.Name
	if head.Metadata.Namespace != "" {
		name = head.Metadata.Namespace + "/" + name
	}
	return fmt.Sprintf(" (%s %s)", head.Kind, name)
}

func (s *Set) addJSON(js []byte) error {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if tm.Kind == "List" {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &list); err != nil {
			return err
		}
		for i, item := range list.Items {
			if err := s.addJSON(item); err != nil {
				return fmt.Errorf("items[%d]%s: %w", i, describe(item), err)
			}
		}
		return nil
	}
	crds, err := admission.Embedded()
	if err != nil {
		return err
	}
	if gvk := tm.GroupVersionKind(); crds.Handles(gvk) {
		return s.decodeCRD(crds, gvk, js, tm)
	}
	switch tm.GroupVersionKind().GroupKind().String() {
	case "NodePool.karpenter.sh", "NodeClaim.karpenter.sh", "EC2NodeClass.karpenter.k8s.aws", "KWOKNodeClass.karpenter.kwok.sh":
		return s.decodeCRDTyped(js, tm) // another apiVersion: refused there
	case "Node":
		return decodeInto(js, tm, "v1", &s.Nodes)
	case "Pod":
		return decodeInto(js, tm, "v1", &s.Pods)
	case "Deployment.apps":
		return decodeInto(js, tm, "apps/v1", &s.Deployments)
	case "ReplicaSet.apps":
		return decodeInto(js, tm, "apps/v1", &s.ReplicaSets)
	case "StatefulSet.apps":
		return decodeInto(js, tm, "apps/v1", &s.StatefulSets)
	case "DaemonSet.apps":
		return decodeInto(js, tm, "apps/v1", &s.DaemonSets)
	case "Job.batch":
		return decodeInto(js, tm, "batch/v1", &s.Jobs)
	case "Namespace":
		return decodeInto(js, tm, "v1", &s.Namespaces)
	case "PersistentVolumeClaim":
		return decodeInto(js, tm, "v1", &s.PersistentVolumeClaims)
	case "PersistentVolume":
		return decodeInto(js, tm, "v1", &s.PersistentVolumes)
	case "PodDisruptionBudget.policy":
		return decodeInto(js, tm, "policy/v1", &s.PodDisruptionBudgets)
	case "StorageClass.storage.k8s.io":
		return decodeInto(js, tm, "storage.k8s.io/v1", &s.StorageClasses)
	}
	if ignoredKinds[tm.Kind] {
		if s.Ignored == nil {
			s.Ignored = map[string]int{}
		}
		s.Ignored[tm.Kind]++
		return nil
	}
	if tm.Kind == "" {
		return fmt.Errorf("kind: required")
	}
	return fmt.Errorf("unsupported kind %s (apiVersion %s)", tm.Kind, tm.APIVersion)
}

// decodeCRD reads an object of one of Nodewright's CRDs: unknown fields
// are refused first (a strict decode, discarded), then the object is
// admitted as kube-apiserver would create it (admit) and decoded with its
// defaults.
func (s *Set) decodeCRD(crds *admission.CRDs, gvk schema.GroupVersionKind, js []byte, tm metav1.TypeMeta) error {
	var probe Set
	if err := probe.decodeCRDTyped(js, tm); err != nil {
		return err
	}
	admitted, err := admit(crds, gvk, js)
	if err != nil {
		return err
	}
	return s.decodeCRDTyped(admitted, tm)
}

// decodeCRDTyped strictly decodes an object of one of the CRDs' kinds.
func (s *Set) decodeCRDTyped(js []byte, tm metav1.TypeMeta) error {
	switch tm.GroupVersionKind().GroupKind().String() {
	case "NodePool.karpenter.sh":
		return decodeInto(js, tm, karpv1.SchemeGroupVersion.String(), &s.NodePools)
	case "NodeClaim.karpenter.sh":
		return decodeInto(js, tm, karpv1.SchemeGroupVersion.String(), &s.NodeClaims)
	case "EC2NodeClass.karpenter.k8s.aws":
		return decodeInto(js, tm, awsv1.SchemeGroupVersion.String(), &s.EC2NodeClasses)
	case "KWOKNodeClass.karpenter.kwok.sh":
		return decodeInto(js, tm, kwokv1alpha1.SchemeGroupVersion.String(), &s.KWOKNodeClasses)
	}
	return fmt.Errorf("unsupported kind %s (apiVersion %s)", tm.Kind, tm.APIVersion)
}

// admit does to an object of one of Nodewright's CRDs what kube-apiserver
// does on create: it fills the schema's defaults and rejects the object
// with the API server's own message when the schema or a CEL rule would.
// The status is kept (a manifest may describe an object as it is) but not
// checked, as a create ignores it.
func admit(crds *admission.CRDs, gvk schema.GroupVersionKind, js []byte) ([]byte, error) {
	obj, err := admission.Decode(js)
	if err != nil {
		return nil, err
	}
	crds.Default(gvk, obj)
	if err := crds.Validate(context.Background(), gvk, obj); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// decodeInto strictly decodes js as a T of the expected apiVersion and appends it.
func decodeInto[T any](js []byte, tm metav1.TypeMeta, apiVersion string, into *[]*T) error {
	if tm.APIVersion != apiVersion {
		return fmt.Errorf("apiVersion %q: want %s", tm.APIVersion, apiVersion)
	}
	obj := new(T)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return err
	}
	if err := checkCounts(obj); err != nil {
		return err
	}
	*into = append(*into, obj)
	return nil
}
