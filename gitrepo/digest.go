package gitrepo

import (
	"encoding/binary"
	"encoding/hex"
	"hash"

	"go.yaml.in/yaml/v3"
)

// digest identifies what a workload says (its node tree: comments,
// quoting and layout do not count): a plan's checksum covers the
// manifests of the workloads it changes, so that an edit to one of them
// in git between a plan and its execution is seen, while edits elsewhere
// are not.
func digest(h hash.Hash, obj *yaml.Node) string {
	h.Reset()
	hashNode(h, obj, 0)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// hashNode writes n's kind, tag and value, then its children, each
// length-prefixed so that no two trees write the same bytes. Aliases are
// followed (to a bounded depth, as yaml.v3 bounds alias expansion).
func hashNode(h hash.Hash, n *yaml.Node, depth int) {
	var scratch [256]byte
	hashInto(h, n, depth, scratch[:0])
}

func hashInto(h hash.Hash, n *yaml.Node, depth int, buf []byte) {
	if n == nil || depth > 100 {
		return
	}
	if n.Kind == yaml.AliasNode {
		hashInto(h, n.Alias, depth+1, buf)
		return
	}
	buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(n.Kind)<<32|uint64(len(n.Content)))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(n.Tag)))
	buf = append(buf, n.Tag...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(n.Value)))
	buf = append(buf, n.Value...)
	h.Write(buf)
	for _, c := range n.Content {
		hashInto(h, c, depth+1, buf)
	}
}
