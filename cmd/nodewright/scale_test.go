package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodewright/nodewright/internal/operator"
)

// The flags that size the controller are checked before anything
// connects, and an error names the flag at fault; sound values get past
// the check (to the missing kubeconfig).
func TestControllerChecksScaleFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--kube-client-qps", "0"}, "--kube-client-qps 0: want a number above 0"},
		{[]string{"--kube-client-qps", "-5"}, "--kube-client-qps -5"},
		{[]string{"--kube-client-qps", "NaN"}, "--kube-client-qps NaN"},
		{[]string{"--kube-client-burst", "100"}, "--kube-client-burst 100: want at least --kube-client-qps 200"},
		{[]string{"--kube-client-qps", "50.5", "--kube-client-burst", "50"}, "--kube-client-burst 50"},
		{[]string{"--kube-client-qps", "many"}, `invalid argument "many" for "--kube-client-qps"`},
		{[]string{"--kube-client-qps", "1e19", "--kube-client-burst", "1"}, "--kube-client-burst 1: want at least --kube-client-qps 1e+19"},
		{[]string{"--controller-workers", "0"}, "--controller-workers 0: want at least 1"},
		{[]string{"--informer-resync-period", "-1m"}, "--informer-resync-period -1m0s"},
		{[]string{"--kube-client-qps", "50.5", "--kube-client-burst", "51"}, "--kubeconfig"},
		{[]string{"--kube-client-qps", "1000", "--kube-client-burst", "1500", "--controller-workers", "100", "--informer-resync-period", "0"}, "--kubeconfig"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := run(t, append([]string{"controller", "--kubeconfig", missing}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The scale settings come from the environment unless a flag says
// otherwise, and reach the operator's configuration; a resync period of 0
// means never, not controller-runtime's default.
func TestScaleSettingsFromEnvironmentAndFlags(t *testing.T) {
	ten := 10 * time.Hour
	never := time.Duration(0)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want operator.Config
	}{
		{"defaults", nil, nil, operator.Config{KubeClientQPS: 200, KubeClientBurst: 300, ControllerWorkers: 20, InformerResync: &ten}},
		{"environment", map[string]string{"KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "80", "CONTROLLER_WORKERS": "64", "INFORMER_RESYNC_PERIOD": "0s"}, nil,
			operator.Config{KubeClientQPS: 50, KubeClientBurst: 80, ControllerWorkers: 64, InformerResync: &never}},
		{"flags win", map[string]string{"KUBE_CLIENT_QPS": "50", "CONTROLLER_WORKERS": "64"}, []string{"--kube-client-qps=400", "--kube-client-burst=600", "--controller-workers=8"},
			operator.Config{KubeClientQPS: 400, KubeClientBurst: 600, ControllerWorkers: 8, InformerResync: &ten}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST", "CONTROLLER_WORKERS", "INFORMER_RESYNC_PERIOD"} {
				t.Setenv(name, tc.env[name])
			}
			var o scaleOptions
			f := pflag.NewFlagSet("controller", pflag.ContinueOnError)
			o.register(f)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			var conf operator.Config
			o.apply(&conf)
			if conf.KubeClientQPS != tc.want.KubeClientQPS || conf.KubeClientBurst != tc.want.KubeClientBurst || conf.ControllerWorkers != tc.want.ControllerWorkers ||
				conf.InformerResync == nil || *conf.InformerResync != *tc.want.InformerResync {
				t.Errorf("qps %v burst %d workers %d resync %v, want %v %d %d %v", conf.KubeClientQPS, conf.KubeClientBurst, conf.ControllerWorkers, conf.InformerResync,
					tc.want.KubeClientQPS, tc.want.KubeClientBurst, tc.want.ControllerWorkers, *tc.want.InformerResync)
			}
		})
	}
}
