package simulator

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// clusterScoped are the kinds the simulator knows that have no namespace.
var clusterScoped = map[string]bool{
	"Node": true, "Namespace": true, "PersistentVolume": true, "StorageClass": true, "CSINode": true, "CSIDriver": true,
	"VolumeAttachment": true, "PriorityClass": true, "ClusterRole": true, "ClusterRoleBinding": true, "RuntimeClass": true,
	"NodePool": true, "NodeClaim": true, "KWOKNodeClass": true, "EC2NodeClass": true, "CustomResourceDefinition": true,
}

// restMapper maps every kind of scheme to its resource and scope.
func restMapper(scheme *runtime.Scheme) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(scheme.PreferredVersionAllGroups())
	for gvk := range scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" || gvk.Kind == "Status" {
			continue
		}
		scope := meta.RESTScopeNamespace
		if clusterScoped[gvk.Kind] {
			scope = meta.RESTScopeRoot
		}
		m.Add(gvk, scope)
	}
	return m
}
