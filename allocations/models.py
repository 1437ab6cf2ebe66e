"""Models of merit allocations (projects, rounds, grants) arrive with the allocations issue."""
