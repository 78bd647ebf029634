package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Ports are the stack's client-facing ports, remembered in Dir/ports.json
// so that a restart of the same state keeps them and a running `starter`
// or worker need not be reconfigured.
type Ports struct {
	Temporal int `json:"temporal"`
	S3       int `json:"s3"`
	Postgres int `json:"postgres,omitempty"`
}

const portsFile = "ports.json"

// loadPorts reads the remembered ports; none remembered is the zero Ports.
func loadPorts(dir string) (Ports, error) {
	var p Ports
	data, err := os.ReadFile(filepath.Join(dir, portsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read %s: %w", portsFile, err)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return Ports{}, fmt.Errorf("read %s: %w (delete it to pick new ports)", portsFile, err)
	}
	return p, nil
}

func savePorts(dir string, p Ports) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, portsFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", portsFile, err)
	}
	return nil
}

// pickPort is the port a service starts on: the one asked for (which must
// be free), else the remembered one while it is free, else 0 (a free one).
func pickPort(asked, remembered int) (int, error) {
	if asked != 0 {
		return asked, checkPortFree(asked)
	}
	if remembered != 0 && checkPortFree(remembered) == nil {
		return remembered, nil
	}
	return 0, nil
}
