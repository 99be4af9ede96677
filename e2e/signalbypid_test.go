package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// No test signals a fluxd by its PID number: once that fluxd has exited,
// the number may be another process's, and a clean-up's SIGTERM or
// SIGKILL lands on a stranger (a CI run lost a test's fluxctl that way).
// localstack.Fluxd's Signal, Stop and Wait go through the process handle
// instead. Flagged: a Kill (syscall or unix) whose target is, or was
// copied in the same function from, a .PID; and os.FindProcess.
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
		for _, bad := range signalsByPID(f) {
			t.Errorf("%s: signals a process by a fluxd's PID number: use the Fluxd's Signal, Stop or Wait", fset.Position(bad))
		}
	}
}

// signalsByPID returns where f signals by a PID number (TestNoSignalByPID).
func signalsByPID(f *ast.File) []token.Pos {
	mentionsPID := func(e ast.Node, copies map[string]bool) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				found = found || n.Sel.Name == "PID"
			case *ast.Ident:
				found = found || copies[n.Name]
			}
			return !found
		})
		return found
	}
	var bad []token.Pos
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		copies := map[string]bool{} // names given a .PID in this function
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if id, ok := n.Lhs[min(i, len(n.Lhs)-1)].(*ast.Ident); ok && mentionsPID(rhs, copies) {
						copies[id.Name] = true
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch {
				case (pkg.Name == "syscall" || pkg.Name == "unix") && sel.Sel.Name == "Kill" && len(n.Args) > 0 && mentionsPID(n.Args[0], copies):
					bad = append(bad, n.Pos())
				case pkg.Name == "os" && sel.Sel.Name == "FindProcess":
					bad = append(bad, n.Pos())
				}
			}
			return true
		})
	}
	return bad
}
