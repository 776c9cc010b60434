"""Planning and dispatch: which routes a request takes, in which order, and what runs around
each attempt (the route packages, route memory, custom-op registrations, the model snapshot, the
captured output, emulation of removed options)."""
