//go:build integration

package chart_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// render templates the chart and decodes its objects.
func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", "nw", chartDir, "--namespace", "nodewright"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return objs
		} else if err != nil {
			t.Fatalf("decoding the rendered chart: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func find(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

func into[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if u == nil {
		t.Fatalf("no %T rendered", out)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestChartLintsClean(t *testing.T) {
	for _, args := range [][]string{nil, {"--set", "settings.cloudProvider=kwok"}, {"--set", "settings.clusterName=demo,metrics.serviceMonitor.enabled=true"}} {
		if out, err := helm(t, append([]string{"lint", chartDir, "--strict"}, args...)...); err != nil || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint %v: %v\n%s", args, err, out)
		}
	}
	if out, err := helm(t, "template", "nw", chartDir, "--set", "settings.cloudProvider=gcp"); err == nil || !strings.Contains(out, "cloudProvider") {
		t.Errorf("an unknown cloud provider rendered: %v\n%s", err, out)
	}
}

// What a production install needs: two replicas with leader election in
// the release namespace, a PDB, spread, probes, resources, a locked-down
// container, the aws flags, a metrics Service (and ServiceMonitor when
// asked), and the CRDs of api/crds.
func TestChartRendersAProductionController(t *testing.T) {
	objs := render(t, "--set", "settings.clusterName=demo,settings.interruptionQueue=demo,settings.awsRegion=eu-west-1")
	d := into[appsv1.Deployment](t, find(objs, "Deployment"))
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	for _, arg := range []string{"controller", "--cloud-provider=aws", "--leader-elect=true", "--leader-election-namespace=nodewright",
		"--cluster-name=demo", "--interruption-queue=demo", "--aws-region=eu-west-1", "--metrics-bind-address=:8080"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(toStrings(sc.Capabilities.Drop), []string{"ALL"}) {
		t.Errorf("container security context %+v", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod security context %+v: want non-root", psc)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("probes %v/%v, resources %v", c.LivenessProbe, c.ReadinessProbe, c.Resources)
	}
	if len(pod.TopologySpreadConstraints) != 2 {
		t.Errorf("topology spread %v, want zone and hostname", pod.TopologySpreadConstraints)
	}
	for _, kind := range []string{"PodDisruptionBudget", "ServiceAccount", "Service", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if find(objs, kind) == nil {
			t.Errorf("no %s rendered", kind)
		}
	}
	if find(objs, "ServiceMonitor") != nil {
		t.Error("a ServiceMonitor rendered without being asked for")
	}
	if find(render(t, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor") == nil {
		t.Error("no ServiceMonitor with metrics.serviceMonitor.enabled")
	}
	// The chart's CRDs are the generated ones.
	generated, _ := filepath.Glob("../../../api/crds/*.yaml")
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(g)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/nodewright/crds/%s differs from api/crds (run make generate): %v", filepath.Base(g), err)
		}
	}
}

// Least privilege: no wildcard verbs or resources, nothing on secrets or
// configmaps; node creation only for the kwok provider.
func TestChartRBACIsLeastPrivilege(t *testing.T) {
	for _, provider := range []string{"aws", "kwok"} {
		objs := render(t, "--set", "settings.cloudProvider="+provider+",settings.clusterName=demo")
		role := into[rbacv1.ClusterRole](t, find(objs, "ClusterRole"))
		createsNodes := false
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
				t.Errorf("%s: wildcard rule %+v", provider, r)
			}
			if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "configmaps") {
				t.Errorf("%s: rule on %v", provider, r.Resources)
			}
			if slices.Contains(r.Resources, "nodes") && slices.Contains(r.Verbs, "create") {
				createsNodes = true
			}
		}
		if createsNodes != (provider == "kwok") {
			t.Errorf("%s: creates nodes %v; only the kwok provider makes Node objects", provider, createsNodes)
		}
		// Namespaced roles: leader election in the release namespace, and
		// for the kwok provider, which plays its nodes' kubelet, their
		// Leases in kube-node-lease. Leases only.
		namespaces := map[string]bool{}
		for _, o := range objs {
			if o.GetKind() != "Role" {
				continue
			}
			role := into[rbacv1.Role](t, o)
			namespaces[role.Namespace] = true
			if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"leases"}) || slices.Contains(role.Rules[0].Verbs, "*") {
				t.Errorf("%s: role %s/%s %+v, want leases only, no wildcard", provider, role.Namespace, role.Name, role.Rules)
			}
		}
		if namespaces["kube-node-lease"] != (provider == "kwok") {
			t.Errorf("%s: a role in kube-node-lease: %v; only the kwok provider renews node leases", provider, namespaces["kube-node-lease"])
		}
	}
}

func toStrings[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}
