package versitygw

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the server when the test binary
// dies without calling Stop (a panic, a timeout, a package without
// TestMain), so no orphan keeps a port and a folder.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// checkXattr reports whether dir's filesystem stores user xattrs, which
// versitygw's posix backend uses for object metadata.
func checkXattr(dir string) error {
	probe := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return fmt.Errorf("xattr probe: %w", err)
	}
	defer os.Remove(probe)
	if err := syscall.Setxattr(probe, "user.versitygw", []byte("1"), 0); err != nil {
		return fmt.Errorf("xattr probe: %w", err)
	}
	return nil
}
