package main

import (
	"fmt"
	"os"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// Who plays the kubelet of the kwok provider's nodes (--kwok).
const (
	// kwokBuiltin: Nodewright's own emulated kubelet (--kwok-kubelet).
	kwokBuiltin = "builtin"
	// kwokReal: the real kwok controller ($NODEWRIGHT_KWOK_BIN, built by
	// `make kwok`), run by the control plane; Nodewright's kubelet is off.
	kwokReal = "real"
	// kwokAuto: real when $NODEWRIGHT_KWOK_BIN is set, builtin otherwise.
	kwokAuto = "auto"
)

// kwokMode resolves --kwok for a provider, given the kwok binary's path
// ("" when none is at hand), to builtin or real.
func kwokMode(flag, provider, bin string) (string, error) {
	switch flag {
	case kwokAuto:
		if provider == "kwok" && bin != "" {
			return kwokReal, nil
		}
		return kwokBuiltin, nil
	case kwokBuiltin:
		return kwokBuiltin, nil
	case kwokReal:
		if provider != "kwok" {
			return "", fmt.Errorf("--kwok=real plays the kwok provider's nodes, not those of --cloud-provider %s", provider)
		}
		if bin == "" {
			return "", fmt.Errorf("--kwok=real needs the kwok binary in %s: run NODEWRIGHT_KWOK_BIN=$(hack/kwok.sh) make sandbox", controlplane.EnvKWOKBin)
		}
		return kwokReal, nil
	default:
		return "", fmt.Errorf("--kwok %q: want builtin, real or auto", flag)
	}
}

// checkKWOKBinary fails early, before anything starts, when the kwok binary
// named by the environment is not an executable file.
func checkKWOKBinary(bin string) error {
	info, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("the kwok binary in %s: %w", controlplane.EnvKWOKBin, err)
	}
	if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("the kwok binary in %s (%s) is not an executable file", controlplane.EnvKWOKBin, bin)
	}
	return nil
}
