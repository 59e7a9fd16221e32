package conformance

import (
	"testing"
)

// affinePod renders a pending pod with labels and an optional required
// pod affinity term (YAML flow mapping) and node selector.
func affinePod(name, namespace, labels, term, nodeSelector string) string {
	aff := ""
	if term != "" {
		aff = "\n  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [" + term + "]}}"
	}
	sel := ""
	if nodeSelector != "" {
		sel = "\n  nodeSelector: {" + nodeSelector + "}"
	}
	return `
---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + namespace + `, labels: {` + labels + `}}
spec:` + aff + sel + `
  containers: [{name: c, image: x, resources: {requests: {cpu: "100m"}}}]
`
}

func term(app, key string) string {
	return `{topologyKey: ` + key + `, labelSelector: {matchLabels: {app: ` + app + `}}}`
}

// sameZone fails unless every pod is placed on a new claim in one zone.
func sameZone(t *testing.T, d decision, zone string, pods ...string) {
	t.Helper()
	for _, p := range pods {
		nc := d.claimOf(p)
		if nc == nil {
			t.Errorf("pod %s not placed: %s", p, d.unschedulable(p))
			continue
		}
		if zone == "" {
			zone = nc.Zone
		}
		if nc.Zone != zone {
			t.Errorf("pod %s in %s, want %s", p, nc.Zone, zone)
		}
	}
}

// Theme 3: required pod affinity to pods the same solve places.
func TestPodAffinityWithinASolve(t *testing.T) {
	const hostname, zone = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
	run(t, []tcase{
		{
			name:     "hostname affinity to a pending pod: one node",
			simulate: true,
			upstream: "scheduling/topology_test.go: Pod Affinity/Anti-Affinity: should schedule a pod with pod affinity to a pod scheduled in the same batch (hostname)",
			yaml:     affinePod("db", "default", "app: db", "", "") + affinePod("web", "default", "app: web", term("db", hostname), ""),
			check: func(t *testing.T, d decision) {
				a, b := d.claimOf("db"), d.claimOf("web")
				if a == nil || b == nil || a != b {
					t.Errorf("db on %v, web on %v: want one NodeClaim for both", a, b)
				}
			},
		},
		{
			name:     "zone affinity to a zone-constrained pending pod",
			simulate: true,
			upstream: "scheduling/topology_test.go: Pod Affinity/Anti-Affinity: should schedule a pod with pod affinity to a pod with a zonal node selector in the same batch",
			yaml: affinePod("db", "default", "app: db", "", "topology.kubernetes.io/zone: test-zone-2") +
				affinePod("web", "default", "app: web", term("db", zone), ""),
			check: func(t *testing.T, d decision) { sameZone(t, d, "test-zone-2", "db", "web") },
		},
		{
			name:     "a chain of zone affinities",
			simulate: true,
			upstream: "scheduling/topology_test.go: Pod Affinity/Anti-Affinity: should handle chains of pod affinity (db -> web -> cache -> ui)",
			yaml: affinePod("db", "default", "app: db", "", "topology.kubernetes.io/zone: test-zone-3") +
				affinePod("web", "default", "app: web", term("db", zone), "") +
				affinePod("cache", "default", "app: cache", term("web", zone), "") +
				affinePod("ui", "default", "app: ui", term("cache", zone), ""),
			check: func(t *testing.T, d decision) { sameZone(t, d, "test-zone-3", "db", "web", "cache", "ui") },
		},
		{
			name:     "self affinity on the zone keeps the replicas together",
			simulate: true,
			upstream: "scheduling/topology_test.go: Pod Affinity/Anti-Affinity: should schedule pods with self zonal affinity in one zone",
			yaml: affinePod("a", "default", "app: x", term("x", zone), "") + affinePod("b", "default", "app: x", term("x", zone), "") +
				affinePod("c", "default", "app: x", term("x", zone), ""),
			check: func(t *testing.T, d decision) { sameZone(t, d, "", "a", "b", "c") },
		},
		{
			name:     "affinity to a pod in another namespace listed by name",
			simulate: true,
			upstream: "scheduling/topology_test.go: Pod Affinity/Anti-Affinity: should respect the namespaces list of a pod affinity term",
			yaml: affinePod("db", "data", "app: db", "", "topology.kubernetes.io/zone: test-zone-2") +
				affinePod("web", "default", "app: web", `{topologyKey: topology.kubernetes.io/zone, namespaces: [data], labelSelector: {matchLabels: {app: db}}}`, ""),
			check: func(t *testing.T, d decision) { sameZone(t, d, "test-zone-2", "db", "web") },
		},
		{
			name:     "an empty namespaceSelector selects every namespace",
			upstream: "scheduling/topology_test.go: Pod Affinity/Anti-Affinity: should select pods of all namespaces with an empty namespaceSelector",
			yaml: affinePod("db", "data", "app: db", "", "topology.kubernetes.io/zone: test-zone-1") +
				affinePod("web", "default", "app: web", `{topologyKey: topology.kubernetes.io/zone, namespaceSelector: {}, labelSelector: {matchLabels: {app: db}}}`, ""),
			check: func(t *testing.T, d decision) { sameZone(t, d, "test-zone-1", "db", "web") },
		},
	})
}
