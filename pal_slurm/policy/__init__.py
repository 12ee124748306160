"""Pure policies: queue orders and placements, registered by name."""
