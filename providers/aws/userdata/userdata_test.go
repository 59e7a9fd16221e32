package userdata

import (
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// parts reads an AL2023 document back: each part's content type and body.
func parts(t *testing.T, doc string) [][2]string {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("not a MIME document: %v\n%s", err, doc)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var out [][2]string
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		out = append(out, [2]string{p.Header.Get("Content-Type"), string(b)})
	}
}

var node = Node{ClusterName: "demo", Endpoint: "https://demo.example", CABundle: "Q0E=", ServiceCIDR: "10.100.0.0/16", MaxPods: 58,
	Labels: map[string]string{"karpenter.sh/nodepool": "gpu", "team": "ml"},
	Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}

func TestAL2023(t *testing.T) {
	cases := []struct {
		name   string
		custom string
		want   []string // content types, in order
	}{
		{"no user data", "", []string{"application/node.eks.aws"}},
		{"a shell script runs first", "#!/bin/bash\necho hello\n", []string{"text/x-shellscript; charset=\"us-ascii\"", "application/node.eks.aws"}},
		{"a NodeConfig of the user's is merged before ours", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n",
			[]string{"application/node.eks.aws", "application/node.eks.aws"}},
		{"a MIME document keeps its parts", "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho one\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho two\n--BOUNDARY--\n",
			[]string{"text/x-shellscript", "text/x-shellscript", "application/node.eks.aws"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node
			n.Custom, n.LocalStorageRAID0 = tc.custom, true
			doc, err := AL2023(n)
			if err != nil {
				t.Fatal(err)
			}
			got := parts(t, doc)
			if len(got) != len(tc.want) {
				t.Fatalf("%d parts, want %d:\n%s", len(got), len(tc.want), doc)
			}
			for i := range got {
				if got[i][0] != tc.want[i] {
					t.Errorf("part %d is %q, want %q", i, got[i][0], tc.want[i])
				}
			}
			ours := got[len(got)-1][1]
			for _, s := range []string{"name: demo", "apiServerEndpoint: https://demo.example", "certificateAuthority: Q0E=", "maxPods: 58",
				`--node-labels="karpenter.sh/nodepool=gpu,team=ml"`, `--register-with-taints="nvidia.com/gpu=true:NoSchedule"`, "localStorage:\n      strategy: RAID0"} {
				if !strings.Contains(ours, s) {
					t.Errorf("the NodeConfig lacks %q:\n%s", s, ours)
				}
			}
		})
	}
	if _, err := AL2023(Node{Custom: "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello"}); err == nil {
		t.Error("a MIME document that is not multipart was accepted")
	}
}

func TestBottlerocket(t *testing.T) {
	n := node
	n.Custom = "[settings.kubernetes]\ncluster-name = \"wrong\"\nimage-gc-high-threshold-percent = 85\n\n[settings.kubernetes.node-labels]\n\"owner\" = \"me\"\n\n[settings.host-containers.admin]\nenabled = true\n"
	doc, err := Bottlerocket(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"cluster-name = \"demo\"", "api-server = \"https://demo.example\"", "max-pods = 58", "image-gc-high-threshold-percent = 85",
		"\"owner\" = \"me\"", "\"karpenter.sh/nodepool\" = \"gpu\"", "[settings.host-containers.admin]", "enabled = true",
		"[settings.kubernetes.node-taints]\n\"nvidia.com/gpu\" = [\"true:NoSchedule\"]",
	} {
		if !strings.Contains(doc, s) {
			t.Errorf("the settings lack %q:\n%s", s, doc)
		}
	}
	if strings.Contains(doc, "wrong") || strings.Count(doc, "[settings.kubernetes]") != 1 {
		t.Errorf("the user's cluster-name survived, or the table appears twice:\n%s", doc)
	}
	if _, err := Bottlerocket(Node{Custom: "[settings.kubernetes\nx = 1"}); err == nil {
		t.Error("a broken table header was accepted")
	}
}
