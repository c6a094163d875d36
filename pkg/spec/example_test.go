package spec

import "testing"

// The documented example must stay a valid spec.
func TestDocsExample(t *testing.T) {
	s, err := LoadFile("../../docs/spec.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("docs/spec.example.yaml does not validate: %v", err)
	}
	if s.Name != "web-api" || s.Memory != "256Mi" || len(s.SchedulingConstraints) != 3 || s.ProgressDeadline != "10m" {
		t.Errorf("unexpected example contents: %+v", s)
	}
}
