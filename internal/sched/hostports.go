package sched

import (
	corev1 "k8s.io/api/core/v1"
)

// hostPort is one host port a pod binds.
type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

// conflicts follows kube-scheduler: the same protocol and port, and the same
// host IP or either one a wildcard.
func (a hostPort) conflicts(b hostPort) bool {
	if a.protocol != b.protocol || a.port != b.port {
		return false
	}
	return a.ip == b.ip || isWildcard(a.ip) || isWildcard(b.ip)
}

func isWildcard(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

// hostPorts lists the host ports of a pod's containers and restartable
// (sidecar) init containers.
func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, port := range c.Ports {
				if port.HostPort <= 0 {
					continue
				}
				proto := port.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{protocol: proto, ip: port.HostIP, port: port.HostPort})
			}
		}
	}
	add(p.Spec.Containers, false)
	add(p.Spec.InitContainers, true)
	return out
}

// portsConflict reports whether any of want conflicts with any of used.
func portsConflict(used, want []hostPort) bool {
	for _, w := range want {
		for _, u := range used {
			if w.conflicts(u) {
				return true
			}
		}
	}
	return false
}
