//go:build integration

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/admission"
)

// invalidCase edits a valid object into an invalid one. The API server must
// reject it, and its message must name the offending field.
type invalidCase struct {
	name   string
	kind   string            // NodePool, NodeClaim or EC2NodeClass
	set    map[string]string // dotted path -> YAML value
	del    []string          // dotted paths to remove
	update bool              // create the valid object, then submit the edit as an update
	field  string            // the field path the error names
	msg    string            // text the error carries
}

const oneReq = `[{key: kubernetes.io/arch, operator: In, values: [amd64]}]`

var invalidCases = []invalidCase{
	// NodePool requirements.
	{name: "Gt with two values", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["3", "4"]}]`},
		field: "spec.template.spec.requirements[0]", msg: "must have a single positive integer value"},
	{name: "Gt with a word", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: [three]}]`},
		field: "spec.template.spec.requirements[0]", msg: "must have a single positive integer value"},
	{name: "Lt with a negative number", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["-1"]}]`},
		field: "spec.template.spec.requirements[0]", msg: "must have a single positive integer value"},
	{name: "Gte without values", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-cpu, operator: Gte}]`},
		field: "spec.template.spec.requirements[0]", msg: "must have a single positive integer value"},
	{name: "In without values", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": oneReq[:len(oneReq)-1] + `, {key: topology.kubernetes.io/zone, operator: In, values: []}]`},
		field: "spec.template.spec.requirements[1]", msg: "must have a value defined"},
	{name: "minValues above the number of values", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5], minValues: 3}]`},
		field: "spec.template.spec.requirements[0]", msg: "must have at least that many values"},
	{name: "minValues zero", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 0}]`},
		field: "spec.template.spec.requirements[0].minValues", msg: "greater than or equal to 1"},
	{name: "minValues above 50", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 51}]`},
		field: "spec.template.spec.requirements[0].minValues", msg: "less than or equal to 50"},
	{name: "karpenter.sh/nodepool as a requirement key", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.sh/nodepool, operator: In, values: [a]}]`},
		field: "spec.template.spec.requirements", msg: `label "karpenter.sh/nodepool" is restricted`},
	{name: "kubernetes.io/hostname as a requirement key", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: kubernetes.io/hostname, operator: In, values: [a]}]`},
		field: "spec.template.spec.requirements[0].key", msg: `label "kubernetes.io/hostname" is restricted`},
	{name: "unknown key in the karpenter.sh domain", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.sh/team, operator: In, values: [a]}]`},
		field: "spec.template.spec.requirements[0].key", msg: `label domain "karpenter.sh" is restricted`},
	{name: "unknown key in the karpenter.k8s.aws domain", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: karpenter.k8s.aws/instance-colour, operator: In, values: [red]}]`},
		field: "spec.template.spec.requirements[0].key", msg: `label domain "karpenter.k8s.aws" is restricted`},
	{name: "unknown operator", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: kubernetes.io/arch, operator: Equals, values: [amd64]}]`},
		field: "spec.template.spec.requirements[0].operator", msg: "Unsupported value"},
	{name: "key that is not a label key", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: "not a key", operator: Exists}]`},
		field: "spec.template.spec.requirements[0].key", msg: "should match"},
	{name: "value longer than 63 characters", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.requirements": `[{key: team, operator: In, values: [` + strings.Repeat("a", 64) + `]}]`},
		field: "spec.template.spec.requirements[0].values[0]", msg: "may not be more than 63"},
	{name: "no requirements", kind: "NodePool", del: []string{"spec.template.spec.requirements"},
		field: "spec.template.spec.requirements", msg: "Required value"},

	// NodePool disruption.
	{name: "budget nodes 101%", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: "101%"}]}`},
		field: "spec.disruption.budgets[0].nodes", msg: "should match"},
	{name: "budget nodes not a number", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: ten}]}`},
		field: "spec.disruption.budgets[0].nodes", msg: "should match"},
	{name: "budget schedule without duration", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: "0", schedule: "0 9 * * mon-fri"}]}`},
		field: "spec.disruption.budgets", msg: "'schedule' must be set with 'duration'"},
	{name: "budget duration without schedule", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: "0", duration: 8h}]}`},
		field: "spec.disruption.budgets", msg: "'schedule' must be set with 'duration'"},
	{name: "budget duration in days", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: "0", schedule: "@daily", duration: 1d}]}`},
		field: "spec.disruption.budgets[0].duration", msg: "should match"},
	{name: "budget schedule with too few fields", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: "0", schedule: "0 9 *", duration: 1h}]}`},
		field: "spec.disruption.budgets[0].schedule", msg: "should match"},
	{name: "budget reason Expired", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{budgets: [{nodes: "1", reasons: [Expired]}]}`},
		field: "spec.disruption.budgets[0].reasons[0]", msg: "Unsupported value"},
	{name: "consolidateAfter 5x", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{consolidateAfter: 5x}`},
		field: "spec.disruption.consolidateAfter", msg: "should match"},
	{name: "unknown consolidationPolicy", kind: "NodePool",
		set:   map[string]string{"spec.disruption": `{consolidationPolicy: WhenUnderutilized}`},
		field: "spec.disruption.consolidationPolicy", msg: "Unsupported value"},
	{name: "expireAfter forever", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.expireAfter": `forever`},
		field: "spec.template.spec.expireAfter", msg: "should match"},
	{name: "terminationGracePeriod in days", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.terminationGracePeriod": `2d`},
		field: "spec.template.spec.terminationGracePeriod", msg: "should match"},

	// NodePool weight, limits, replicas.
	{name: "weight 0", kind: "NodePool", set: map[string]string{"spec.weight": `0`},
		field: "spec.weight", msg: "greater than or equal to 1"},
	{name: "weight 101", kind: "NodePool", set: map[string]string{"spec.weight": `101`},
		field: "spec.weight", msg: "less than or equal to 100"},
	{name: "static pool with a weight", kind: "NodePool", set: map[string]string{"spec.replicas": `2`, "spec.weight": `10`},
		field: "spec", msg: "'weight' cannot be set on static NodePools"},
	{name: "static pool with a cpu limit", kind: "NodePool", set: map[string]string{"spec.replicas": `2`, "spec.limits": `{cpu: "10"}`},
		field: "spec", msg: "only 'limits.nodes' is supported on static NodePools"},
	{name: "negative replicas", kind: "NodePool", set: map[string]string{"spec.replicas": `-1`},
		field: "spec.replicas", msg: "greater than or equal to 0"},

	// NodePool nodeClassRef, taints, labels.
	{name: "empty nodeClassRef name", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.nodeClassRef": `{group: karpenter.k8s.aws, kind: EC2NodeClass, name: ""}`},
		field: "spec.template.spec.nodeClassRef.name", msg: "name may not be empty"},
	{name: "nodeClassRef without kind", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.nodeClassRef": `{group: karpenter.k8s.aws, name: default}`},
		field: "spec.template.spec.nodeClassRef.kind", msg: "Required value"},
	{name: "nodeClassRef group with a slash", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.nodeClassRef": `{group: karpenter.k8s.aws/v1, kind: EC2NodeClass, name: default}`},
		field: "spec.template.spec.nodeClassRef.group", msg: "should match"},
	{name: "no nodeClassRef", kind: "NodePool", del: []string{"spec.template.spec.nodeClassRef"},
		field: "spec.template.spec.nodeClassRef", msg: "Required value"},
	{name: "taint with an unknown effect", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.taints": `[{key: dedicated, value: gpu, effect: Sometimes}]`},
		field: "spec.template.spec.taints[0].effect", msg: "Unsupported value"},
	{name: "taint with an empty key", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.taints": `[{key: "", effect: NoSchedule}]`},
		field: "spec.template.spec.taints[0].key", msg: "at least 1 chars long"},
	{name: "startup taint with a bad key", kind: "NodePool",
		set:   map[string]string{"spec.template.spec.startupTaints": `[{key: "has space", effect: NoSchedule}]`},
		field: "spec.template.spec.startupTaints[0].key", msg: "should match"},
	{name: "template label karpenter.sh/nodepool", kind: "NodePool",
		set:   map[string]string{"spec.template.metadata.labels": `{karpenter.sh/nodepool: other}`},
		field: "spec.template.metadata.labels", msg: `label "karpenter.sh/nodepool" is restricted`},
	{name: "template label kubernetes.io/hostname", kind: "NodePool",
		set:   map[string]string{"spec.template.metadata.labels": `{kubernetes.io/hostname: pinned}`},
		field: "spec.template.metadata.labels", msg: `label "kubernetes.io/hostname" is restricted`},
	{name: "template label in the karpenter.sh domain", kind: "NodePool",
		set:   map[string]string{"spec.template.metadata.labels": `{karpenter.sh/team: a}`},
		field: "spec.template.metadata.labels", msg: `label domain "karpenter.sh" is restricted`},
	{name: "template label value with a space", kind: "NodePool",
		set:   map[string]string{"spec.template.metadata.labels": `{team: "a b"}`},
		field: "spec.template.metadata.labels.team", msg: "should match"},

	// NodePool updates.
	{name: "changing nodeClassRef kind", kind: "NodePool", update: true,
		set:   map[string]string{"spec.template.spec.nodeClassRef": `{group: karpenter.k8s.aws, kind: OtherNodeClass, name: default}`},
		field: "spec.template.spec.nodeClassRef", msg: "nodeClassRef.kind is immutable"},
	{name: "changing nodeClassRef group", kind: "NodePool", update: true,
		set:   map[string]string{"spec.template.spec.nodeClassRef": `{group: karpenter.kwok.sh, kind: EC2NodeClass, name: default}`},
		field: "spec.template.spec.nodeClassRef", msg: "nodeClassRef.group is immutable"},
	{name: "turning a dynamic pool static", kind: "NodePool", update: true,
		set:   map[string]string{"spec.replicas": `3`},
		field: "spec", msg: "Cannot transition NodePool between static"},

	// NodeClaim.
	{name: "mutating a NodeClaim spec", kind: "NodeClaim", update: true,
		set:   map[string]string{"spec.requirements": `[{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}]`},
		field: "spec", msg: "spec is immutable"},
	{name: "NodeClaim Gt with two values", kind: "NodeClaim",
		set:   map[string]string{"spec.requirements": `[{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["1", "2"]}]`},
		field: "spec.requirements[0]", msg: "must have a single positive integer value"},
	{name: "NodeClaim empty nodeClassRef kind", kind: "NodeClaim",
		set:   map[string]string{"spec.nodeClassRef": `{group: karpenter.k8s.aws, kind: "", name: default}`},
		field: "spec.nodeClassRef.kind", msg: "kind may not be empty"},
	{name: "NodeClaim without requirements", kind: "NodeClaim", del: []string{"spec.requirements"},
		field: "spec.requirements", msg: "Required value"},
	{name: "NodeClaim taint with an unknown effect", kind: "NodeClaim",
		set:   map[string]string{"spec.taints": `[{key: a, effect: NoWay}]`},
		field: "spec.taints[0].effect", msg: "Unsupported value"},
	{name: "NodeClaim expireAfter in days", kind: "NodeClaim",
		set:   map[string]string{"spec.expireAfter": `30d`},
		field: "spec.expireAfter", msg: "should match"},

	// EC2NodeClass AMIs.
	{name: "alias without a version", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[{alias: al2023}]`},
		field: "spec.amiSelectorTerms[0].alias", msg: "'alias' is improperly formatted"},
	{name: "alias of an unknown family", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[{alias: ubuntu@latest}]`},
		field: "spec.amiSelectorTerms[0].alias", msg: "family is not supported"},
	{name: "windows alias pinned to a version", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[{alias: windows2022@v20240101}]`, "spec.amiFamily": `Windows2022`},
		field: "spec.amiSelectorTerms[0].alias", msg: "windows families may only specify version 'latest'"},
	{name: "alias beside another term", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[{alias: al2023@latest}, {id: ami-123}]`},
		field: "spec.amiSelectorTerms", msg: "'alias' is mutually exclusive"},
	{name: "alias and id in one term", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[{alias: al2023@latest, id: ami-123}]`},
		field: "spec.amiSelectorTerms", msg: "mutually exclusive"},
	{name: "no AMI selector terms", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[]`, "spec.amiFamily": `AL2023`},
		field: "spec.amiSelectorTerms", msg: "should have at least 1 items"},
	{name: "amiFamily that contradicts the alias", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiFamily": `Bottlerocket`},
		field: "spec", msg: "amiFamily must be 'AL2023' or 'Custom'"},
	{name: "no alias and no amiFamily", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiSelectorTerms": `[{id: ami-0123456789abcdef0}]`},
		field: "spec", msg: "must specify amiFamily"},
	{name: "unknown amiFamily", kind: "EC2NodeClass",
		set:   map[string]string{"spec.amiFamily": `Ubuntu`},
		field: "spec.amiFamily", msg: "Unsupported value"},

	// EC2NodeClass identity, selectors, tags.
	{name: "role and instanceProfile", kind: "EC2NodeClass",
		set:   map[string]string{"spec.instanceProfile": `my-profile`},
		field: "spec", msg: "must specify exactly one of ['role', 'instanceProfile']"},
	{name: "neither role nor instanceProfile", kind: "EC2NodeClass", del: []string{"spec.role"},
		field: "spec", msg: "must specify exactly one of ['role', 'instanceProfile']"},
	{name: "switching from role to instanceProfile", kind: "EC2NodeClass", update: true,
		set: map[string]string{"spec.instanceProfile": `my-profile`}, del: []string{"spec.role"},
		field: "spec", msg: "changing from 'instanceProfile' to 'role' is not supported"},
	{name: "empty subnetSelectorTerms", kind: "EC2NodeClass",
		set:   map[string]string{"spec.subnetSelectorTerms": `[]`},
		field: "spec.subnetSelectorTerms", msg: "subnetSelectorTerms cannot be empty"},
	{name: "subnet term with id and tags", kind: "EC2NodeClass",
		set:   map[string]string{"spec.subnetSelectorTerms": `[{id: subnet-123, tags: {a: b}}]`},
		field: "spec.subnetSelectorTerms", msg: "'id' is mutually exclusive"},
	{name: "subnet id of the wrong shape", kind: "EC2NodeClass",
		set:   map[string]string{"spec.subnetSelectorTerms": `[{id: sn-123}]`},
		field: "spec.subnetSelectorTerms[0].id", msg: "should match"},
	{name: "empty security group term", kind: "EC2NodeClass",
		set:   map[string]string{"spec.securityGroupSelectorTerms": `[{}]`},
		field: "spec.securityGroupSelectorTerms", msg: "expected at least one, got none"},
	{name: "security group tag with an empty value", kind: "EC2NodeClass",
		set:   map[string]string{"spec.securityGroupSelectorTerms": `[{tags: {karpenter.sh/discovery: ""}}]`},
		field: "spec.securityGroupSelectorTerms[0].tags", msg: "empty tag keys or values aren't supported"},
	{name: "restricted cluster tag", kind: "EC2NodeClass",
		set:   map[string]string{"spec.tags": `{kubernetes.io/cluster/prod: owned}`},
		field: "spec.tags", msg: "restricted tag matching kubernetes.io/cluster/"},
	{name: "restricted nodepool tag", kind: "EC2NodeClass",
		set:   map[string]string{"spec.tags": `{karpenter.sh/nodepool: default}`},
		field: "spec.tags", msg: "restricted tag matching karpenter.sh/nodepool"},
	{name: "capacity reservation id of the wrong shape", kind: "EC2NodeClass",
		set:   map[string]string{"spec.capacityReservationSelectorTerms": `[{id: reservation-1}]`},
		field: "spec.capacityReservationSelectorTerms[0].id", msg: "should match"},

	// EC2NodeClass devices, metadata, kubelet.
	{name: "volume larger than EBS allows", kind: "EC2NodeClass",
		set:   map[string]string{"spec.blockDeviceMappings": `[{deviceName: /dev/xvda, ebs: {volumeSize: 100Ti}}]`},
		field: "spec.blockDeviceMappings[0].ebs.volumeSize", msg: "should match"},
	{name: "volume with neither size nor snapshot", kind: "EC2NodeClass",
		set:   map[string]string{"spec.blockDeviceMappings": `[{deviceName: /dev/xvda, ebs: {volumeType: gp3}}]`},
		field: "spec.blockDeviceMappings[0].ebs", msg: "snapshotID or volumeSize must be defined"},
	{name: "two root volumes", kind: "EC2NodeClass",
		set:   map[string]string{"spec.blockDeviceMappings": `[{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi}}, {deviceName: /dev/xvdb, rootVolume: true, ebs: {volumeSize: 20Gi}}]`},
		field: "spec.blockDeviceMappings", msg: "must have only one blockDeviceMappings with rootVolume"},
	{name: "unknown volume type", kind: "EC2NodeClass",
		set:   map[string]string{"spec.blockDeviceMappings": `[{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeType: gp9}}]`},
		field: "spec.blockDeviceMappings[0].ebs.volumeType", msg: "Unsupported value"},
	{name: "instanceStorePolicy RAID1", kind: "EC2NodeClass",
		set:   map[string]string{"spec.instanceStorePolicy": `RAID1`},
		field: "spec.instanceStorePolicy", msg: "Unsupported value"},
	{name: "httpTokens sometimes", kind: "EC2NodeClass",
		set:   map[string]string{"spec.metadataOptions": `{httpTokens: sometimes}`},
		field: "spec.metadataOptions.httpTokens", msg: "Unsupported value"},
	{name: "hop limit 65", kind: "EC2NodeClass",
		set:   map[string]string{"spec.metadataOptions": `{httpPutResponseHopLimit: 65}`},
		field: "spec.metadataOptions.httpPutResponseHopLimit", msg: "less than or equal to 64"},
	{name: "image GC high below low", kind: "EC2NodeClass",
		set:   map[string]string{"spec.kubelet": `{imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}`},
		field: "spec.kubelet", msg: "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
	{name: "systemReserved gpu", kind: "EC2NodeClass",
		set:   map[string]string{"spec.kubelet": `{systemReserved: {nvidia.com/gpu: "1"}}`},
		field: "spec.kubelet.systemReserved", msg: "valid keys for systemReserved"},
	{name: "kubeReserved negative memory", kind: "EC2NodeClass",
		set:   map[string]string{"spec.kubelet": `{kubeReserved: {memory: "-1Gi"}}`},
		field: "spec.kubelet.kubeReserved", msg: "cannot be a negative resource quantity"},
	{name: "evictionSoft without a grace period", kind: "EC2NodeClass",
		set:   map[string]string{"spec.kubelet": `{evictionSoft: {memory.available: 5%}}`},
		field: "spec.kubelet", msg: "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
	{name: "maxPods negative", kind: "EC2NodeClass",
		set:   map[string]string{"spec.kubelet": `{maxPods: -1}`},
		field: "spec.kubelet.maxPods", msg: "greater than or equal to 0"},
}

var validBase = map[string]string{
	"NodePool":     minimalNodePool,
	"NodeClaim":    minimalNodeClaim,
	"EC2NodeClass": minimalEC2NodeClass,
}

func TestInvalidManifestsAreRejected(t *testing.T) {
	if len(invalidCases) < 40 {
		t.Fatalf("the table must hold at least 40 cases, has %d", len(invalidCases))
	}
	ctx := context.Background()
	for i, c := range invalidCases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("invalid-%d", i)
			obj := parse(t, fmt.Sprintf(validBase[c.kind], name))
			if c.update {
				created := mustCreate(ctx, t, obj)
				obj = created
			}
			for path, value := range c.set {
				setPath(t, obj.Object, path, value)
			}
			for _, path := range c.del {
				deletePath(obj.Object, path)
			}
			var err error
			offline := obj.DeepCopy()
			if c.update {
				_, err = resourceFor(t, c.kind).Update(ctx, obj, metav1.UpdateOptions{FieldValidation: "Strict"})
			} else {
				_, err = create(ctx, t, obj)
				if err == nil {
					_ = resourceFor(t, c.kind).Delete(ctx, name, metav1.DeleteOptions{})
				}
			}
			if err == nil {
				t.Fatalf("the API server accepted the invalid %s", c.kind)
			}
			t.Logf("rejected: %v", err)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), c.field+":") {
				t.Errorf("the error does not name the field %s:\n%v", c.field, err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("the error does not say %q:\n%v", c.msg, err)
			}
			if c.update {
				return // transition rules: offline checks see creates only
			}
			// Offline (plan, simulate): the same answer, word for word.
			crds, aerr := admission.Embedded()
			if aerr != nil {
				t.Fatal(aerr)
			}
			js, jerr := json.Marshal(offline.Object)
			if jerr != nil {
				t.Fatal(jerr)
			}
			decoded, derr := admission.Decode(js)
			if derr != nil {
				t.Fatal(derr)
			}
			gvk := offline.GroupVersionKind()
			crds.Default(gvk, decoded)
			if ours := crds.Validate(ctx, gvk, decoded); ours == nil {
				t.Errorf("offline validation accepts what the API server rejects")
			} else if ours.Error() != err.Error() {
				t.Errorf("offline validation answers\n  %v\nthe API server\n  %v", ours, err)
			}
		})
	}
}

// The valid bases themselves must be accepted, or every case above would pass
// for the wrong reason.
func TestValidBasesAreAccepted(t *testing.T) {
	ctx := context.Background()
	for kind, doc := range validBase {
		t.Run(kind, func(t *testing.T) {
			mustCreate(ctx, t, parse(t, fmt.Sprintf(doc, "valid-base")))
		})
	}
}
