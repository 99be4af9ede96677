package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// No test signals a fluxd by its PID number (syscall.Kill(f.PID, …)): once
// that fluxd has exited, the number may be another process's, and a
// clean-up's SIGTERM or SIGKILL lands on a stranger (a CI run lost a
// test's fluxctl that way). localstack.Fluxd's Signal, Stop and Wait go
// through the process handle instead.
func TestNoSignalByPID(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || fn.Sel.Name != "Kill" {
				return true
			}
			if pkg, ok := fn.X.(*ast.Ident); !ok || pkg.Name != "syscall" {
				return true
			}
			if sel, ok := call.Args[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "PID" {
				t.Errorf("%s: syscall.Kill by a .PID: use the Fluxd's Signal, Stop or Wait", fset.Position(call.Pos()))
			}
			return true
		})
	}
}
