//go:build !linux

package versitygw

import (
	"errors"
	"os/exec"
)

// setParentDeathSignal has no portable equivalent outside Linux; Stop (via
// Main) is then the only way the server is ended.
func setParentDeathSignal(*exec.Cmd) {}

// checkXattr assumes no usable xattrs outside Linux, so versitygw's sidecar
// metadata folder is used.
func checkXattr(string) error { return errors.New("xattrs not probed on this OS") }
