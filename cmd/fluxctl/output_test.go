package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// -o yaml is the same document as -o json.
func TestWriteDataYAMLIsTheJSONDocument(t *testing.T) {
	t.Parallel()
	v := []serviceJSON{{ID: "default:deployment/web", Status: "ready", Containers: []containerJSON{{Name: "app", Image: "reg/web:1.0"}}, TagFilters: map[string]string{"app": "semver:~1"}}}
	var j, y bytes.Buffer
	if err := writeData(&j, "json", v); err != nil {
		t.Fatal(err)
	}
	if err := writeData(&y, "yaml", v); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, y.String())
	}
	if diff := cmp.Diff(fromJSON, fromYAML); diff != "" {
		t.Errorf("yaml and json differ (-json +yaml):\n%s", diff)
	}
	if err := checkOutput("xml"); err == nil {
		t.Error("-o xml accepted")
	}
}
