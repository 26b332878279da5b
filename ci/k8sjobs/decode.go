// Package k8sjobs reads the Kubernetes Job manifests of reckon's CI templates as the API server
// would: YAML documents decoded strictly into the batch/v1 Job types.
package k8sjobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	batchv1 "k8s.io/api/batch/v1"
)

// Decode reads the Jobs of a manifest of "---"-separated documents. A field the Job types do
// not have (a typo, an indentation slip) is an error, as kubectl's server-side field validation
// would make it.
func Decode(raw string) ([]batchv1.Job, error) {
	var jobs []batchv1.Job
	for i, doc := range strings.Split(raw, "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		var job batchv1.Job
		if err := dec.Decode(&job); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}
