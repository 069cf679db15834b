package inventory

// The readers of a recorded inventory, under the names the tests of
// package inventory_test use; adopters get the same through
// Inventory.Family (its Resources) and Generation.Versions.
var (
	Decode    = decode
	Resources = resources
	Versions  = versions
)
