package userdata

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Node is what a node is told at boot.
type Node struct {
	ClusterName, Endpoint, CABundle, ServiceCIDR string
	// MaxPods, when positive, caps the kubelet's pods.
	MaxPods int64
	// ClusterDNS are the kubelet's DNS servers, when set.
	ClusterDNS []string
	// Labels and Taints the node registers with.
	Labels map[string]string
	Taints []corev1.Taint
	// Custom is the EC2NodeClass's spec.userData, "" when unset.
	Custom string
	// LocalStorageRAID0 has AL2023 put the instance-store volumes in a
	// RAID 0 array for the kubelet and containers (instanceStorePolicy).
	LocalStorageRAID0 bool
}

// boundary separates the parts of an AL2023 document (as EKS's own).
const boundary = "//"

// AL2023 is the MIME multi-part user data of an AL2023 node: the user's
// parts first (a MIME document's parts, or its text as one part: a
// NodeConfig when it is one, else a shell script), then the NodeConfig
// that joins the cluster. nodeadm merges NodeConfigs in order, so the
// cluster's settings cannot be lost to the user's.
func AL2023(n Node) (string, error) {
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return "", err
	}
	parts, err := customParts(n.Custom)
	if err != nil {
		return "", fmt.Errorf("spec.userData: %w", err)
	}
	parts = append(parts, part{contentType: "application/node.eks.aws", body: nodeConfig(n)})
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", p.contentType)
		pw, err := w.CreatePart(h)
		if err != nil {
			return "", err
		}
		if _, err := io.WriteString(pw, p.body); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

type part struct{ contentType, body string }

// customParts reads the user's user data.
func customParts(custom string) ([]part, error) {
	if strings.TrimSpace(custom) == "" {
		return nil, nil
	}
	if !strings.HasPrefix(strings.TrimSpace(custom), "MIME-Version") {
		contentType := "text/x-shellscript; charset=\"us-ascii\""
		if strings.Contains(custom, "node.eks.aws/") && strings.Contains(custom, "NodeConfig") {
			contentType = "application/node.eks.aws"
		}
		return []part{{contentType: contentType, body: custom}}, nil
	}
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(custom, " \n\r\t")))
	if err != nil {
		return nil, fmt.Errorf("reading the MIME document: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("the MIME document is not multipart (Content-Type %q)", msg.Header.Get("Content-Type"))
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var out []part
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading part %d of the MIME document: %w", len(out)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("reading part %d of the MIME document: %w", len(out)+1, err)
		}
		out = append(out, part{contentType: p.Header.Get("Content-Type"), body: string(body)})
	}
}

// nodeConfig is the NodeConfig (YAML) that joins the cluster.
func nodeConfig(n Node) string {
	var b strings.Builder
	b.WriteString("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n")
	fmt.Fprintf(&b, "    name: %s\n    apiServerEndpoint: %s\n    certificateAuthority: %s\n    cidr: %s\n", n.ClusterName, n.Endpoint, n.CABundle, n.ServiceCIDR)
	if n.LocalStorageRAID0 {
		b.WriteString("  instance:\n    localStorage:\n      strategy: RAID0\n")
	}
	b.WriteString("  kubelet:\n")
	if n.MaxPods > 0 || len(n.ClusterDNS) > 0 {
		b.WriteString("    config:\n")
	}
	if n.MaxPods > 0 {
		fmt.Fprintf(&b, "      maxPods: %d\n", n.MaxPods)
	}
	if len(n.ClusterDNS) > 0 {
		fmt.Fprintf(&b, "      clusterDNS:\n")
		for _, d := range n.ClusterDNS {
			fmt.Fprintf(&b, "      - %s\n", d)
		}
	}
	b.WriteString("    flags:\n")
	if labels := labelFlag(n.Labels); labels != "" {
		fmt.Fprintf(&b, "    - --node-labels=%q\n", labels)
	}
	if taints := taintFlag(n.Taints); taints != "" {
		fmt.Fprintf(&b, "    - --register-with-taints=%q\n", taints)
	}
	return b.String()
}

func labelFlag(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+labels[k])
	}
	return strings.Join(out, ",")
}

func taintFlag(taints []corev1.Taint) string {
	out := make([]string, 0, len(taints))
	for _, t := range taints {
		out = append(out, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	return strings.Join(out, ",")
}

// Bottlerocket is the TOML settings of a Bottlerocket node: the user's
// settings with the cluster's (name, API server, CA, max pods) set over
// them, and the node's labels and taints added to the user's.
func Bottlerocket(n Node) (string, error) {
	doc, err := parseTOML(n.Custom)
	if err != nil {
		return "", fmt.Errorf("spec.userData: %w", err)
	}
	k := doc.table("settings.kubernetes")
	k.set("cluster-name", strconv.Quote(n.ClusterName))
	k.set("api-server", strconv.Quote(n.Endpoint))
	if n.CABundle != "" {
		k.set("cluster-certificate", strconv.Quote(n.CABundle))
	}
	if n.MaxPods > 0 {
		k.set("max-pods", strconv.FormatInt(n.MaxPods, 10))
	}
	if len(n.ClusterDNS) > 0 {
		k.set("cluster-dns-ip", strconv.Quote(n.ClusterDNS[0]))
	}
	labels := doc.table("settings.kubernetes.node-labels")
	for _, key := range slices.Sorted(maps.Keys(n.Labels)) {
		labels.set(strconv.Quote(key), strconv.Quote(n.Labels[key]))
	}
	if len(n.Taints) > 0 {
		taints := doc.table("settings.kubernetes.node-taints")
		byKey := map[string][]string{}
		var keys []string
		for _, t := range n.Taints {
			if _, seen := byKey[t.Key]; !seen {
				keys = append(keys, t.Key)
			}
			byKey[t.Key] = append(byKey[t.Key], strconv.Quote(t.Value+":"+string(t.Effect)))
		}
		for _, key := range keys {
			taints.set(strconv.Quote(key), "["+strings.Join(byKey[key], ", ")+"]")
		}
	}
	return doc.String(), nil
}
