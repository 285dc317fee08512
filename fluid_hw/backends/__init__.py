"""Back ends: each runs (or compiles) the same ProgramDesc."""
