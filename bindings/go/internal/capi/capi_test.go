package capi

import "testing"

// The generated wrapper and the header agree on the ABI.
func TestABI(t *testing.T) {
	if got := AccelerateAbiVersion(); got != ABIVersion {
		t.Fatalf("library ABI %d, header %d", got, ABIVersion)
	}
}
