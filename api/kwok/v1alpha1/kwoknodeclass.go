package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of KWOKNodeClass.
const Group = "karpenter.kwok.sh"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &KWOKNodeClass{}, &KWOKNodeClassList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme registers KWOKNodeClass (and its list) with a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

// Labels the kwok provider writes on simulated nodes.
const (
	LabelNodeClass      = Group + "/kwoknodeclass"
	LabelInstanceSize   = Group + "/instance-size"
	LabelInstanceFamily = Group + "/instance-family"
	LabelInstanceCPU    = Group + "/instance-cpu"
	LabelInstanceMemory = Group + "/instance-memory"
)

// KWOKNodeClass configures simulated nodes.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kwoknodeclasses,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type KWOKNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec KWOKNodeClassSpec `json:"spec,omitempty"`
	// +optional
	Status KWOKNodeClassStatus `json:"status,omitempty"`
}

// KWOKNodeClassList is a list of KWOKNodeClasses.
//
// +kubebuilder:object:root=true
type KWOKNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KWOKNodeClass `json:"items"`
}

// KWOKNodeClassSpec configures simulated nodes.
type KWOKNodeClassSpec struct {
	// NodeRegistrationDelay is how long a simulated node takes to register
	// after its NodeClaim launches.
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	NodeRegistrationDelay *metav1.Duration `json:"nodeRegistrationDelay,omitempty"`
}

// KWOKNodeClassStatus is what the kwok provider observes.
type KWOKNodeClassStatus struct {
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
