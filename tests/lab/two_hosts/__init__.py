"""Lab tests on two containers of two lab PVE hosts (a package: its fixture makes them once for its modules)."""
