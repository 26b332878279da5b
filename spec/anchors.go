package spec

import "github.com/goccy/go-yaml/ast"

// collectAnchors records every "&name" in the document, so that aliases can be resolved
// wherever they are used.
func (d *decoder) collectAnchors(root ast.Node) {
	d.anchors = map[string]ast.Node{}
	ast.Walk(anchorVisitor{d}, root)
}

type anchorVisitor struct{ d *decoder }

// Visit records an anchor and goes on into the children.
func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
		v.d.anchors[a.Name.GetToken().Value] = a.Value
	}
	return v
}

// resolve strips anchors, tags and aliases off a node, so that callers see the value itself.
// An alias to an unknown anchor is reported and resolves to nil.
func (d *decoder) resolve(n ast.Node, field string) ast.Node {
	for depth := 0; depth < 32 && n != nil; depth++ {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			if v.GetToken().Value == "!!str" {
				// "!!str 5" is the string "5".
				if _, ok := v.Value.(ast.ScalarNode); ok {
					t := *v.Value.GetToken()
					s := ast.String(&t)
					s.Value = t.Value
					return s
				}
			}
			n = v.Value
		case *ast.AliasNode:
			name := v.Value.GetToken().Value
			target, ok := d.anchors[name]
			if !ok {
				d.errorc(CodeSyntax, v, field, "alias *%s names no anchor &%s", name, name)
				return nil
			}
			n = target
		default:
			return n
		}
	}
	return n
}
