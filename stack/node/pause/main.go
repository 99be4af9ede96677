// Command pause is the sandbox ("pause") container of the local stack's real
// node: it holds a pod's namespaces open and reaps orphaned children until
// it is told to stop. registry.k8s.io is out of reach here, so the stack
// builds its own from this file (the upstream one is a few lines of C doing
// the same).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
